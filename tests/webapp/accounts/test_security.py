"""Access: roles everywhere, /metrics, the demo rate, login throttling, the decide form,
the admin's internal fields and bounds, algorithms from the registry, Spark bodies not reflected."""

from __future__ import annotations

import math

import httpx
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from scaling.policy.options import OPTION
from sparkclient.collector.rest import SparkRestClient, SparkRestError
from sparkclient.contract import keys
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_pending, make_user
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.policy_mapping import BOUNDS
from webapp.jobs.services import job_policy_update
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db




# --- no role: 403 everywhere except login ------------------------------------------------------

def test_a_signed_in_user_without_a_role_gets_403_everywhere_but_login(client):
    proposal = make_pending()
    job = proposal.job
    nobody = make_user("nobody", role=None)
    client.force_login(nobody)
    pages = ["/", "/jobs/live/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/live/", f"/jobs/{job.pk}/history/",
             f"/proposals/{proposal.pk}/", f"/audit/jobs/{job.pk}.csv", f"/audit/jobs/{job.pk}.json",
             "/api/jobs/", f"/api/jobs/{job.pk}/", "/api/proposals/", "/api/snapshots/", "/api/audit-events/",
             "/api/schema/", "/api/docs/", "/metrics"]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 403, (url, response.status_code)
    assert "no role" in client.get("/").content.decode()
    assert client.post(f"/proposals/{proposal.pk}/decide/", {"action": "approve"}).status_code == 403
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"
    assert client.get(reverse("login")).status_code == 200
    # The same user through an API token.
    token = Token.objects.create(user=nobody)
    api = type(client)(HTTP_AUTHORIZATION=f"Token {token.key}")
    for url in ("/api/jobs/", "/api/proposals/", "/api/schema/", "/metrics"):
        assert api.get(url).status_code == 403, url
    assert api.post(f"/api/proposals/{proposal.pk}/approve/").status_code == 403
    # A viewer reads.
    client.force_login(make_user("vera", role="viewer"))
    for url in pages:
        assert client.get(url).status_code == 200, url


# --- /metrics: token or allowlist -----------------------------------------------------------------

def test_metrics_takes_a_token_or_an_allowlisted_address(client, settings):
    make_job()
    anonymous = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert anonymous.status_code in (401, 403)
    token = Token.objects.create(user=make_user("prometheus", role="viewer"))
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {token.key}").status_code == 200
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    allowed = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert allowed.status_code == 200 and b"sparkscaler_job_health" in allowed.content
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9").status_code in (401, 403)
    # A forwarded header does not count: only the connection's address.
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9", HTTP_X_FORWARDED_FOR="10.1.2.3").status_code in (401, 403)



@pytest.mark.parametrize("accept", ["text/html", "application/json", "text/html,application/xhtml+xml;q=0.9"])
def test_metrics_authenticates_before_it_looks_at_accept(client, settings, accept):
    """A browser's Accept gets 401 (not 406) when anonymous, and the text format when allowed."""
    make_job()
    anonymous = client.get("/metrics", HTTP_ACCEPT=accept, REMOTE_ADDR="10.1.2.3")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    token = Token.objects.create(user=make_user("prometheus", role="viewer"))
    scraped = client.get("/metrics", HTTP_ACCEPT=accept, HTTP_AUTHORIZATION=f"Token {token.key}")
    assert scraped.status_code == 200 and scraped["Content-Type"].startswith("text/plain")
    assert b"sparkscaler_job_health" in scraped.content
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert client.get("/metrics", HTTP_ACCEPT=accept, REMOTE_ADDR="10.1.2.3").status_code == 200

# --- demo rate: operator-only, bounded, finite ----------------------------------------------------

def test_the_demo_rate_is_operator_only_bounded_and_finite(client, workflow_redis, settings):
    job = make_job()
    url = reverse("dashboard:set_rate", args=[job.pk])
    client.force_login(make_user("vera", role="viewer"))
    assert client.post(url, {"rate": "50"}).status_code == 403
    assert workflow_redis.get(keys.gen_rate(job.topic)) is None
    client.force_login(make_user("olga", role="operator"))
    for bad in ("nan", "inf", "-inf", "1e308", "-1", "abc", "", str(settings.DEMO_MAX_RATE * 2)):
        response = client.post(url, {"rate": bad})
        assert response.status_code == 400, bad
        assert "nothing was changed" in response.content.decode()
    assert workflow_redis.get(keys.gen_rate(job.topic)) is None
    assert client.post(url, {"rate": "250"}).status_code == 302
    assert float(workflow_redis.get(keys.gen_rate(job.topic))) == 250.0


def test_a_job_without_a_topic_has_no_demo_rate_to_set(client, workflow_redis):
    """An operator's own pipeline reads its own source: no generator key is written for it."""
    job = make_job(name="clicks")
    job.topic = ""
    job.save(update_fields=["topic"])
    client.force_login(make_user("olga", role="operator"))
    response = client.post(reverse("dashboard:set_rate", args=[job.pk]), {"rate": "250"})
    assert response.status_code == 409 and "nothing was changed" in response.content.decode()
    assert workflow_redis.keys(keys.gen_rate("*")) == []


# --- login throttling (django-axes) ---------------------------------------------------------------

def test_forty_wrong_passwords_lock_the_account_out_even_with_the_right_one(client):
    make_user("olga", role="operator")
    login = reverse("login")
    for _ in range(40):
        client.post(login, {"username": "olga", "password": "wrong"}, REMOTE_ADDR="203.0.113.7")
    locked = client.post(login, {"username": "olga", "password": "pw-for-tests"}, REMOTE_ADDR="203.0.113.7")
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get("/", REMOTE_ADDR="203.0.113.7").status_code == 302  # still signed out


def test_a_right_password_before_the_limit_signs_in(client):
    make_user("olga", role="operator")
    login = reverse("login")
    for _ in range(2):
        client.post(login, {"username": "olga", "password": "wrong"})
    assert client.post(login, {"username": "olga", "password": "pw-for-tests"}).status_code == 302
    assert client.get("/").status_code == 200


# --- the decide form: exactly approve or reject ---------------------------------------------------

@pytest.mark.parametrize("action", ["APPROVE", "Approve", "approve ", "", "delete", "reject\x00"])
def test_the_decide_form_refuses_any_other_action_with_400(client, enqueued, action):
    proposal = make_pending()
    client.force_login(make_user("olga", role="operator"))
    response = client.post(f"/proposals/{proposal.pk}/decide/", {"action": action, "comment": "no"})
    assert response.status_code == 400
    assert "approve, reject" in response.content.decode()
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"
    assert not AuditEvent.objects.filter(proposal=proposal).exclude(action="proposed").exists()


def test_the_decide_form_still_approves_and_rejects(client, enqueued):
    first, second = make_pending("a"), make_pending("b")
    client.force_login(make_user("olga", role="operator"))
    assert client.post(f"/proposals/{first.pk}/decide/", {"action": "approve"}).status_code == 302
    assert client.post(f"/proposals/{second.pk}/decide/", {"action": "reject", "comment": "not now"}).status_code == 302
    assert Proposal.objects.get(pk=first.pk).status == "approved"
    assert Proposal.objects.get(pk=second.pk).status == "rejected"


# --- admin: internal fields read-only, bounds, JSON shapes, algorithm registry ------------------------

def _admin_client(client):
    admin = make_user("ada", role="admin")
    client.force_login(admin)
    return client


def _form_data(client, url: str) -> dict:
    """The admin page's form (the job's, or the policy's on its own page) as the browser would post it back."""
    response = client.get(url)
    assert response.status_code == 200
    form = response.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = value
    return {k: v for k, v in data.items() if v is not None}


def _change_form_data(client, job: Job) -> dict:
    return _form_data(client, reverse("admin:jobs_job_change", args=[job.pk]))


def test_admin_internal_fields_are_read_only(client):
    job = make_job()
    Job.objects.filter(pk=job.pk).update(health="running", last_error="", scaler_state={"k": 1})
    client = _admin_client(client)
    data = _change_form_data(client, job)
    data.update({"health": "down", "last_error": "<b>owned</b>", "scaler_state": "{}", "config": '{"cores": 64}',
                 "config_changed_at_0": "2020-01-01", "config_changed_at_1": "00:00:00", "name": job.name})
    response = client.post(reverse("admin:jobs_job_change", args=[job.pk]), data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    job.refresh_from_db()
    assert (job.health, job.last_error, job.scaler_state, job.config["cores"], job.config_changed_at) == \
        ("running", "", {"k": 1}, 1, None)


def test_the_jobs_admin_action_re_enables_a_suspended_auto_approval_and_audits_it(client):
    job = make_job(mode="auto")
    JobPolicy.objects.filter(job=job).update(auto_approve_suspended=True, auto_approve_suspended_reason="rollback")
    client = _admin_client(client)
    response = client.post(reverse("admin:jobs_job_changelist"),
                           {"action": "resume_auto_approval", "_selected_action": [job.pk]})
    assert response.status_code == 302
    assert not JobPolicy.objects.get(job=job).auto_approve_suspended
    assert AuditEvent.objects.filter(job=job, action="auto_approve_resumed", actor_name="ada",
                                     actor_user__username="ada").count() == 1


def test_an_audited_policy_edit_is_in_the_audit_trail():
    job = make_job()
    job_policy_update(job=job, changes={"max_cores": 6}, actor="ada")
    event = AuditEvent.objects.get(job=job, action="policy_changed")
    assert (event.actor_name, event.actor_user, event.after) == ("ada", None, {"max_cores": 6})


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_every_numeric_policy_field_is_bounded(field):
    from django.core.exceptions import ValidationError

    policy = JobPolicy.objects.get(job=make_job())
    policy.full_clean()
    if OPTION[field].enabled_by:  # bounded while its feature is on (Flink validateNumberIfEnabled)
        setattr(policy, OPTION[field].enabled_by, True)
    integer = JobPolicy._meta.get_field(field).get_internal_type().endswith("IntegerField")
    # (an integer field's form refuses "inf" and "nan" before the model sees them)
    for bad in (1e308, -1e308) if integer else (1e308, math.inf, math.nan, -1e308):
        setattr(policy, field, bad)
        with pytest.raises(ValidationError) as error:
            policy.full_clean()
        assert field in error.value.message_dict, (field, bad, error.value.message_dict)


def test_huge_ttl_and_backoff_multiplier_are_refused_in_the_admin(client):
    job = make_job()
    client = _admin_client(client)
    url = reverse("admin:jobs_jobpolicy_change", args=[job.policy.pk])
    for field in ("proposal_ttl_s", "restart_backoff_multiplier"):
        data = _form_data(client, url)
        data[field] = "1e308"
        response = client.post(url, data)
        assert response.status_code == 200, field  # the form again, with the error
        assert field in response.context["adminform"].form.errors
    policy = JobPolicy.objects.get(job=job)
    assert (policy.proposal_ttl_s, policy.restart_backoff_multiplier) == (900.0, 2.0)


def test_the_policy_has_its_own_admin_page_with_collapsed_sections_and_audited_edits(client):
    from webapp.proposals.models import AuditEvent

    job = make_job()
    client = _admin_client(client)
    url = reverse("admin:jobs_jobpolicy_change", args=[job.policy.pk])
    page = client.get(url)
    titles = [fieldset.name for fieldset in page.context["adminform"]]
    assert titles == ["Mode", "Targets", "Bounds", "Delays", "Learning from past rescales", "Guardrails (auto mode)",
                      "Back-off (failed executions)", "Other algorithms", "Memory"]
    assert all("collapse" in fieldset.classes for fieldset in list(page.context["adminform"])[1:])
    assert url in client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    form = page.context["adminform"].form
    assert not {"auto_approve_suspended", "auto_approve_suspended_reason", "job"} & set(form.fields)
    data = {**_form_data(client, url), "max_cores": "6", "auto_approve_suspended": "on"}
    assert client.post(url, data).status_code == 302
    job.policy.refresh_from_db()
    assert job.policy.max_cores == 6 and not job.policy.auto_approve_suspended
    event = AuditEvent.objects.get(job=job, action="policy_changed")
    assert (event.before, event.after, event.actor_name, event.actor_user.username) == (
        {"max_cores": 8}, {"max_cores": 6}, "ada", "ada")
    assert event.reason == {"code": "policy_edited", "data": {}}


KNOBS = ('[{"name": "cores", "default": 1, "min": 1, "max": 8, "sets": "executors"}, '
         '{"name": "p", "default": 2, "min": 1, "max": 64, "sets": "repartition"}]')


@pytest.mark.parametrize("config, knobs", [
    ("[1, 2]", KNOBS), ('"x"', KNOBS), ('{"cores": 1000000000}', KNOBS), ('{"cores": 2.5}', KNOBS),
    ('{"cores": true}', KNOBS), ('{"cores": 1, "q": 1}', KNOBS), ('{"cores": 1, "p": 0}', KNOBS),
    ('{"cores": 1, "p": 1e9}', KNOBS), ('{"cores": 1}', '"x"'), ('{"cores": 1}', "[1, 2]"),
    ('{"cores": 1}', '[{"name": "p; rm", "default": 1, "min": 1, "max": 2}]'),
    ('{"cores": 1}', '[{"name": "p", "default": 1, "min": 1, "max": 1e308}]'),
])
def test_a_new_job_config_and_knobs_are_validated(client, config, knobs):
    client = _admin_client(client)
    data = _form_data(client, reverse("admin:jobs_job_add"))
    response = client.post(reverse("admin:jobs_job_add"), {**data, "name": "new", "config": config, "knobs": knobs})
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert set(form.errors) & {"config", "knobs"}, form.errors
    assert not Job.objects.filter(name="new").exists()


def test_a_valid_new_job_is_saved(client):
    client = _admin_client(client)
    data = _form_data(client, reverse("admin:jobs_job_add"))
    response = client.post(reverse("admin:jobs_job_add"), {**data, "name": "new", "config": '{"cores": 2, "p": 4}',
                                                            "knobs": KNOBS})
    assert response.status_code == 302, response.context["adminform"].form.errors
    job = Job.objects.get(name="new")
    assert job.config == {"cores": 2, "p": 4} and job.health == "collecting"


def test_algorithm_is_a_registry_name_and_a_dotted_path_is_never_imported(monkeypatch):
    import importlib

    from django.core.exceptions import ValidationError

    imported = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real(name, *a))
    policy = JobPolicy.objects.get(job=make_job())
    for bad in ("this:x", "os:system", "scaling.planner.algorithms:DS2Policy", "DS2"):
        policy.algorithm = bad
        with pytest.raises(ValidationError) as error:
            policy.full_clean()
        assert "choose one of batch-ratio, ds2, min-increase" in str(error.value.message_dict["algorithm"])
    assert imported == []
    policy.algorithm = "batch-ratio"
    policy.full_clean()


def test_the_admin_offers_the_algorithms_as_choices(client):
    job = make_job()
    client = _admin_client(client)
    response = client.get(reverse("admin:jobs_jobpolicy_change", args=[job.policy.pk]))
    field = response.context["adminform"].form.fields["algorithm"]
    assert [value for value, _ in field.choices] == ["batch-ratio", "ds2", "min-increase"]


# --- Spark error bodies are summarised ------------------------------------------------------------

@pytest.mark.parametrize("status, content_type", [(200, "text/html"), (500, "text/html"), (404, "text/plain")])
def test_spark_error_bodies_are_summarised_not_reflected(status, content_type):
    body = "<script>alert('x')</script> internal proxy secret token=abc123"
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text=body,
                                                                   headers={"content-type": content_type}))
    with SparkRestClient("http://spark.test:4040", transport=transport, attempts=1) as client:
        with pytest.raises(SparkRestError) as caught:
            client.applications()
    message = str(caught.value)
    assert "<script" not in message and "alert" not in message and "abc123" not in message
    assert f"{len(body)}-byte {content_type} body" in message


# --- one execution per job ------------------------------------------------------------------------

def test_a_rollback_and_an_approval_of_the_same_job_make_exactly_one_execution(enqueued,
                                                                             django_capture_on_commit_callbacks):
    """The race: a succeeded proposal is rolled back while another pending proposal of the same job
    is approved. Whichever comes first wins; the other is refused (409 in the API), so one rescale."""
    from webapp.proposals.lifecycle import TransitionError
    from webapp.proposals.rollback import proposal_rollback
    from webapp.proposals.services import proposal_approve

    pending = make_pending()
    done = make_succeeded(pending.job)
    operator = make_user()
    with django_capture_on_commit_callbacks(execute=True):
        rollback = proposal_rollback(proposal=done, actor=operator, reason="latency")
        with pytest.raises(TransitionError, match="one execution at a time"):
            proposal_approve(proposal=Proposal.objects.get(pk=pending.pk), actor=operator)
    assert enqueued == [(rollback.pk,)]
    assert Proposal.objects.get(pk=pending.pk).status == "pending"
    assert Proposal.objects.filter(job=pending.job, status__in=Proposal.IN_FLIGHT).count() == 1


def test_the_database_refuses_a_second_execution_in_flight_for_a_job():
    """The constraint holds even for a write that bypasses the services."""
    from django.db import IntegrityError, transaction

    pending = make_pending()
    Proposal.objects.filter(pk=pending.pk).update(status="executing")
    with pytest.raises(IntegrityError), transaction.atomic():
        Proposal.objects.create(job=pending.job, status="approved")
    other = make_job("other")
    Proposal.objects.create(job=other, status="approved")  # another job: fine


# --- Redis unreachable: 503 and nothing changed (fast; the real outage is loop/test_faults_redis_outage) --

@pytest.fixture
def redis_down(settings):
    from sparkclient.demo.redisproc import free_port
    from tests.conftest import celery_use_broker
    from webapp.celery import app
    from webapp.jobs.redis import _client

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    previous = app.conf.broker_url, app.conf.result_backend
    settings.REDIS_URL = url
    _client.cache_clear()
    celery_use_broker(url)
    yield url
    celery_use_broker(*previous)  # the broker and the result backend
    _client.cache_clear()


def test_requests_that_need_redis_answer_503_and_change_nothing_while_it_is_down(client, redis_down):
    pending = make_pending()
    done = make_succeeded(make_job("other"))
    operator = make_user("olga", role="operator")
    client.force_login(operator)
    token = Token.objects.create(user=operator)
    api = type(client)(HTTP_AUTHORIZATION=f"Token {token.key}")
    events = AuditEvent.objects.count()
    for response in (api.post(f"/api/proposals/{pending.pk}/approve/"),
                     api.post(f"/api/proposals/{done.pk}/rollback/", {"reason": "x"})):
        assert response.status_code == 503
        assert "unreachable" in response.json()["detail"] and "nothing was changed" in response.json()["detail"]
    page = client.post(f"/proposals/{pending.pk}/decide/", {"action": "approve"}, follow=True)
    assert page.redirect_chain == [(f"/proposals/{pending.pk}/", 302)]
    assert "try again when Redis is back" in page.content.decode()
    rate = client.post(reverse("dashboard:set_rate", args=[pending.job_id]), {"rate": "10"})
    assert rate.status_code == 503
    assert Proposal.objects.get(pk=pending.pk).status == "pending"
    assert Proposal.objects.get(pk=done.pk).status == "succeeded"
    assert AuditEvent.objects.count() == events
    # Reading pages needs no Redis.
    assert client.get(f"/proposals/{pending.pk}/").status_code == 200
