"""Job registration: the declared knobs, the Spark UI rule, the
collector's refusal to follow a URL or app id read from Redis that the registration does not allow,
and the registration / policy API, CLI and admin sharing one validation."""

from __future__ import annotations

import ipaddress
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from sparkclient.contract.spec import KnobTarget
from tests.repo import ROOT
from tests.webapp.factories import job_admin_form, make_user
from webapp.jobs import connect
from webapp.jobs.knobs import KnobListError, parse_knobs
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.services import job_register
from webapp.jobs.sparkui import (
    Refusal,
    RefusalCode,
    SparkUiError,
    UiRule,
    UiTarget,
    parse_host_pattern,
    parse_origin,
    parse_port_range,
    ui_target,
)
from webapp.loop.collect import snapshot_collect
from webapp.proposals.models import AuditEvent

KNOB = {"name": "enrich_partitions", "default": 4, "min": 1, "max": 64, "sets": "repartition"}
#: KNOB as stored (sparkclient.contract.spec.Knob.to_dict, as the runner reports knobs).
STORED = {**KNOB, "description": ""}
APP_ID = "local-1795263667663"


# --- knobs (the pipeline contract's declarations) ----------------------------------------------------

def test_valid_knobs_parse_into_the_contracts_knobs():
    knobs = parse_knobs([KNOB, {"name": "cores", "default": 1, "min": 1, "max": 8, "sets": "executors"}])
    assert [k.name for k in knobs] == ["enrich_partitions", "cores"]
    assert knobs[0].sets is KnobTarget.REPARTITION and knobs[0].to_dict() == STORED


@pytest.mark.parametrize(("change", "message"), [
    ({"min": 8, "max": 4, "default": 4}, "min=8, default=4, max=4"),
    ({"default": 100}, "min=1, default=100, max=64"),
    ({"min": 0}, "needs 1 <= min"),
    ({"default": True}, "default must be an integer"),
    ({"max": 2.5}, "max must be an integer"),
    ({"sets": "cpu"}, "sets must be one of"),
    ({"sets": ["executors"]}, "sets must be one of"),
    ({"name": "Bad Name"}, "a knob name must be"),
    ({"extra": 1}, "unknown keys ['extra']"),
])
def test_invalid_knobs_name_the_knob_and_the_problem(change, message):
    with pytest.raises(KnobListError) as raised:
        parse_knobs([{**KNOB, **change}])
    assert str(raised.value).startswith("knob 1: ") and message in str(raised.value)


def test_knob_list_shape_errors():
    for value, message in [({"name": "x"}, "must be a JSON list"), ([KNOB, KNOB], "declared more than once"),
                           (["x"], "must be a JSON object"), ([{"name": "x"}], "missing keys")]:
        with pytest.raises(KnobListError, match=re.escape(message)):
            parse_knobs(value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
                    max_leaves=20)
KNOB_LIKE = st.fixed_dictionaries({"name": st.text(max_size=5) | st.just("k"), "default": JSON | st.integers(),
                                   "min": st.integers(-2, 5), "max": st.integers(-2, 70),
                                   "sets": st.sampled_from([k.value for k in KnobTarget]) | JSON})


@hyp_settings(max_examples=300, deadline=None)
@given(st.lists(KNOB_LIKE, max_size=3) | JSON)
def test_knob_parser_returns_valid_knobs_or_a_knob_list_error(value):
    try:
        knobs = parse_knobs(value)
    except KnobListError as exc:
        assert exc.errors
        return
    for knob in knobs:
        assert knob.min <= knob.default <= knob.max and (knob.min >= 1 or knob.sets is KnobTarget.OTHER)


# --- the Spark UI rule ----------------------------------------------------------------------------

def test_origins_parse_to_scheme_host_port_and_reject_everything_else():
    assert parse_origin("http://Driver-Host:4040/").url == "http://driver-host:4040"
    assert parse_origin("https://[::1]:4041").url == "https://[::1]:4041"
    assert parse_origin("http://10.0.0.7").port == 80
    for bad in ["ftp://h:1", "http://user:pw@127.0.0.1:4040", "http://127.0.0.1:4040/api/v1/../../x",
                "http://127.0.0.1:4040?x=1", "http://127.0.0.1:4040#f", "http://127.0.0.1:99999", "http://h:0",
                "http://127.0.0.1:4040\\@evil", "http://exa mple:1", "http://ex_ample:1", "", None, 4040,
                "http://127.0.0.1:4040/%2e%2e/", "//127.0.0.1:4040", "http://[fe80::1%25eth0]:4040"]:
        with pytest.raises(SparkUiError):
            parse_origin(bad)


def test_host_patterns_match_names_wildcards_addresses_and_networks():
    assert parse_host_pattern("*.spark.svc").matches("drv-svc.ns.spark.svc")
    assert not parse_host_pattern("*.spark.svc").matches("spark.svc")
    assert not parse_host_pattern("*.spark.svc").matches("evilspark.svc")
    assert parse_host_pattern("10.42.0.0/16").matches("10.42.3.4")
    assert not parse_host_pattern("10.42.0.0/16").matches("10.43.0.1")
    assert not parse_host_pattern("10.42.0.0/16").matches("10.42.example.com")
    assert parse_host_pattern("::1").matches("::1") and not parse_host_pattern("::1").matches("127.0.0.1")
    assert parse_host_pattern("Driver-Host").matches("driver-host")
    assert not parse_host_pattern("driver-host").matches("driver-host.evil.com")
    for bad in ["*.com", "a/b", "10.0.0.0/33", "", "ex ample", 7]:
        with pytest.raises(SparkUiError):
            parse_host_pattern(bad)
    assert parse_port_range("4040-4056") == (4040, 4056) and parse_port_range("4040") == (4040, 4040)
    for bad in ["4056-4040", "0", "70000", "40a0", "4040-", None]:
        with pytest.raises(SparkUiError):
            parse_port_range(bad)


LOCAL = UiRule.of(spark_ui_url="", spark_ui_hosts=["127.0.0.1"], spark_ui_ports="4040-4056")
FIXED = UiRule.of(spark_ui_url="http://driver-host:4040", spark_ui_hosts=[], spark_ui_ports="")


@pytest.mark.parametrize(("rule", "ui_url", "app_id", "code"), [
    (FIXED, "http://driver-host:4041", APP_ID, RefusalCode.URL_NOT_REGISTERED),
    (FIXED, "http://evil:4040", APP_ID, RefusalCode.URL_NOT_REGISTERED),
    (LOCAL, "http://10.0.0.9:4040", APP_ID, RefusalCode.HOST_NOT_ALLOWED),
    (LOCAL, "http://localhost:4040", APP_ID, RefusalCode.HOST_NOT_ALLOWED),
    (LOCAL, "http://127.0.0.1:6379", APP_ID, RefusalCode.PORT_NOT_ALLOWED),
    (LOCAL, "http://127.0.0.1:4040/api/v1/applications/../../../admin", APP_ID, RefusalCode.URL_MALFORMED),
    (LOCAL, "http://127.0.0.1:4040", "../../../admin", RefusalCode.APP_ID_MALFORMED),
    (LOCAL, "http://127.0.0.1:4040", "local-1795263667663/../../x", RefusalCode.APP_ID_MALFORMED),
    (LOCAL, "http://127.0.0.1:4040", "local-1795263667663%2F..", RefusalCode.APP_ID_MALFORMED),
    (LOCAL, "http://127.0.0.1:4040", "local-1795263667663?x=1", RefusalCode.APP_ID_MALFORMED),
    (LOCAL, "http://127.0.0.1:4040", None, RefusalCode.APP_ID_MALFORMED),
    (None, "http://127.0.0.1:4040", APP_ID, RefusalCode.NO_RULE),
])
def test_reports_outside_the_registration_are_refused(rule, ui_url, app_id, code):
    refusal = ui_target(rule, ui_url=ui_url, app_id=app_id)
    assert isinstance(refusal, Refusal) and refusal.code is code
    assert refusal.to_json()["code"] == code.value and "nothing was fetched" in refusal.text()


@pytest.mark.parametrize("app_id", ["local-1795263667663", "app-20261121122206-0000",
                                    "spark-0123456789abcdef0123456789abcdef", "application_1700000000000_0042"])
def test_spark_app_ids_of_every_cluster_manager_are_accepted(app_id):
    assert ui_target(LOCAL, ui_url="http://127.0.0.1:4044/", app_id=app_id) == \
        UiTarget(base_url="http://127.0.0.1:4044", app_id=app_id)
    assert ui_target(FIXED, ui_url="http://DRIVER-host:4040", app_id=app_id).base_url == "http://driver-host:4040"


@hyp_settings(max_examples=400, deadline=None)
@given(ui_url=st.one_of(st.text(max_size=60), st.builds(lambda h, p, tail: f"http://{h}:{p}{tail}",
                                                          st.sampled_from(["127.0.0.1", "localhost", "[::1]", "x"]),
                                                          st.integers(0, 70000), st.text(max_size=12))),
       app_id=st.one_of(st.none(), st.text(max_size=40), st.just(APP_ID)))
def test_only_urls_inside_the_rule_come_out(ui_url, app_id):
    target = ui_target(LOCAL, ui_url=ui_url, app_id=app_id)
    if isinstance(target, UiTarget):
        origin = parse_origin(target.base_url)
        assert origin.host == "127.0.0.1" and 4040 <= origin.port <= 4056 and origin.url == target.base_url
        assert target.app_id == APP_ID
    else:
        assert isinstance(target, Refusal)


# --- a URL planted in Redis is not fetched --------------------------------------------------------

@pytest.fixture
def spy_server():
    """A local HTTP server on 127.0.0.1 that records every request (answers 404)."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            requests.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], requests
    server.shutdown()
    server.server_close()


def _plant(redis_client, job: str, ui_url: str, app_id: str = APP_ID) -> None:
    redis_client.hset(f"ss:runner:{job}", mapping={"state": "running", "ui_url": ui_url, "app_id": app_id,
                                                   "run_id": "run-1", "query_name": f"{job}-query"})


@pytest.mark.django_db
def test_a_url_planted_in_redis_is_not_fetched(workflow_redis, spy_server, client):
    port, requests = spy_server
    planted = f"http://127.0.0.1:{port}"
    fixed = job_register(name="fixed", spark_ui_url="http://127.0.0.1:4040")
    ranged = job_register(name="ranged", spark_ui_hosts=["127.0.0.1"], spark_ui_ports="4040-4056")
    other_host = job_register(name="otherhost", spark_ui_hosts=["driver-host"], spark_ui_ports=f"{port}")
    traversal = job_register(name="traversal", spark_ui_hosts=["127.0.0.1"], spark_ui_ports=f"{port}")
    cases = [(fixed, planted, APP_ID, RefusalCode.URL_NOT_REGISTERED),
             (ranged, planted, APP_ID, RefusalCode.PORT_NOT_ALLOWED),
             (other_host, planted, APP_ID, RefusalCode.HOST_NOT_ALLOWED),
             (traversal, f"{planted}/api/v1/../../steal", APP_ID, RefusalCode.URL_MALFORMED),
             (traversal, planted, "../../../../steal", RefusalCode.APP_ID_MALFORMED)]
    for job, url, app_id, code in cases:
        _plant(workflow_redis, job.name, url, app_id)
        assert snapshot_collect(job=job) is None
        job.refresh_from_db()
        assert job.health == Job.Health.DOWN and job.health_reason["code"] == code.value, job.name
        assert "nothing was fetched" in job.last_error
    assert requests == []
    # The job page shows the reason.
    user = make_user("reader", role="viewer")
    client.force_login(user)
    page = client.get(f"/jobs/{fixed.pk}/").content.decode()
    assert "is not the one registered for this job" in page
    # Control: the same server, inside the registration, is fetched (so the spy can see requests).
    _plant(workflow_redis, traversal.name, planted, APP_ID)
    snapshot_collect(job=traversal)
    assert requests and requests[0].startswith(f"/api/v1/applications/{APP_ID}/")
    traversal.refresh_from_db()
    assert traversal.health_reason == {}


@pytest.mark.django_db
def test_a_registered_name_that_resolves_to_a_denied_address_is_not_fetched(workflow_redis, spy_server, monkeypatch,
                                                                            client):
    port, requests = spy_server
    answers = {"driver.spark.test": [ipaddress.ip_address("169.254.169.254")]}
    monkeypatch.setattr(connect, "system_resolve", lambda name, _port: answers[name])
    job = job_register(name="rebound", spark_ui_hosts=["driver.spark.test"], spark_ui_ports=f"{port}")
    _plant(workflow_redis, job.name, f"http://driver.spark.test:{port}")
    assert snapshot_collect(job=job) is None
    job.refresh_from_db()
    assert job.health == Job.Health.DOWN and requests == []
    assert job.health_reason == {"code": "link_local", "value": "169.254.169.254", "address": "", "embedding": "",
                                 "name": "driver.spark.test"}
    assert "driver.spark.test (resolved to 169.254.169.254) is or contains link-local" in job.last_error
    client.force_login(make_user("reader", role="viewer"))
    assert "driver.spark.test (resolved to 169.254.169.254)" in client.get(f"/jobs/{job.pk}/").content.decode()
    # Control: resolving to this machine, the same registration is fetched, at the address checked.
    answers["driver.spark.test"] = [ipaddress.ip_address("127.0.0.1")]
    snapshot_collect(job=job)
    assert requests and requests[0].startswith(f"/api/v1/applications/{APP_ID}/")


# --- registration: service, API, CLI, admin --------------------------------------------------------

def _post(api, body):
    return api.post("/api/jobs/", json.dumps(body), content_type="application/json")


def _patch(api, url, body):
    return api.patch(url, json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_job_api_round_trip_register_set_auto_edit_policy_and_400_names_the_field(admin_api):
    """The job API: register, set auto mode, edit the policy; a 400 names the field."""
    created = _post(admin_api, {"name": "mine", "spark_ui_hosts": ["*.spark.svc.cluster.local", "10.42.0.0/16"],
                                "spark_ui_ports": "4040-4045", "knobs": [KNOB],
                                "policy": {"max_cores": 6, "metric_window_s": 30}})
    assert created.status_code == 201, created.content
    job = created.json()
    assert job["name"] == "mine" and job["knobs"] == [STORED] and job["mode"] == "manual"
    assert job["spark_ui_hosts"] == ["*.spark.svc.cluster.local", "10.42.0.0/16"]
    assert job["spark_ui_ports"] == "4040-4045"
    policy_url = f"/api/jobs/{job['id']}/policy/"
    assert admin_api.get(policy_url).json()["max_cores"] == 6

    auto = _patch(admin_api, policy_url, {"mode": "auto"})
    assert auto.status_code == 200 and auto.json()["mode"] == "auto"
    assert admin_api.get(f"/api/jobs/{job['id']}/").json()["mode"] == "auto"
    edited = _patch(admin_api, policy_url, {"utilization_target": 0.8})
    assert edited.status_code == 200 and edited.json()["utilization_target"] == 0.8

    for body, field in [({"utilization_target": 5}, "utilization_target"),
                        ({"utilization_target": "NaN"}, "utilization_target"),
                        ({"mode": "yolo"}, "mode"),
                        ({"min_cores": 9}, "min_cores"),  # above max_cores 6: the model's clean()
                        ({"excluded_periods": ["25:00-26:00"]}, "excluded_periods"),
                        ({"auto_approve_suspended": False, "nonsense": 1}, None)]:
        refused = _patch(admin_api, policy_url, body)
        if field is None:  # read-only and unknown fields are ignored, as DRF does
            assert refused.status_code == 200
            continue
        assert refused.status_code == 400 and field in refused.json(), (body, refused.content)
    policy = JobPolicy.objects.get(job_id=job["id"])
    assert (policy.mode, policy.utilization_target, policy.min_cores) == ("auto", 0.8, 1)
    changes = AuditEvent.objects.filter(job_id=job["id"], action="policy_changed").order_by("id")
    assert [e.after for e in changes] == [{"mode": "auto"}, {"utilization_target": 0.8}]
    assert changes[0].actor_user.username == changes[0].actor_name == "api-admin"
    assert changes[0].before == {"mode": "manual"}

    moved = _patch(admin_api, f"/api/jobs/{job['id']}/", {"spark_ui_url": "http://driver-host:4040"})
    assert moved.status_code == 200 and moved.json()["spark_ui_url"] == "http://driver-host:4040"
    bad = _patch(admin_api, f"/api/jobs/{job['id']}/", {"spark_ui_url": "http://driver-host:4040/../x"})
    assert bad.status_code == 400 and "spark_ui_url" in bad.json()
    assert Job.objects.get(pk=job["id"]).spark_ui_url == "http://driver-host:4040"


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [
    ({"name": "x", "knobs": [{**KNOB, "min": 80}]}, "knobs"),
    ({"name": "x", "knobs": "enrich"}, "knobs"),
    ({"name": "x", "knobs": [KNOB, {**KNOB, "sets": "executors"}]}, "knobs"),
    ({"name": "x", "spark_ui_hosts": ["evil/host"]}, "spark_ui_hosts"),
    ({"name": "x", "spark_ui_ports": "9-1"}, "spark_ui_ports"),
    ({"name": "x", "spark_ui_url": "http://u:p@h:4040"}, "spark_ui_url"),
    ({"name": "x", "spark_ui_hosts": [], "spark_ui_url": ""}, "spark_ui_url"),
    ({"name": "not a slug"}, "name"),
    ({"name": "x", "policy": {"mode": "yolo"}}, "policy"),
    ({"name": "x", "policy": {"min_cores": 5, "max_cores": 2}}, "policy"),
])
def test_invalid_registrations_are_400_naming_the_field_and_save_nothing(admin_api, body, field):
    refused = _post(admin_api, body)
    assert refused.status_code == 400 and field in refused.json(), refused.content
    if field == "policy":
        assert refused.json()["policy"], refused.content
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_only_the_admin_role_registers_and_edits(client):
    job = job_register(name="existing")
    for role in ("viewer", "operator"):
        token = Token.objects.create(user=make_user(f"u-{role}", role=role))
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
        assert _post(client, {"name": f"by-{role}"}).status_code == 403
        assert _patch(client, f"/api/jobs/{job.pk}/policy/", {"mode": "auto"}).status_code == 403
        assert _patch(client, f"/api/jobs/{job.pk}/", {"topic": "t"}).status_code == 403
        assert client.get(f"/api/jobs/{job.pk}/policy/").status_code == 200
        assert client.put(f"/api/jobs/{job.pk}/", "{}", content_type="application/json").status_code in (403, 405)
    assert list(Job.objects.values_list("name", flat=True)) == ["existing"]
    assert JobPolicy.objects.get(job=job).mode == "manual"


@pytest.mark.django_db
def test_a_taken_name_is_400(admin_api):
    job_register(name="taken")
    refused = _post(admin_api, {"name": "taken"})
    assert refused.status_code == 400 and "name" in refused.json()


@pytest.mark.django_db
def test_the_admin_form_and_the_api_give_the_same_messages(admin_api):
    bad_knobs = [{**KNOB, "default": 100}]
    api_errors = _post(admin_api, {"name": "x", "knobs": bad_knobs, "spark_ui_hosts": ["a/b"]}).json()
    form = job_admin_form(make_user("site-admin", role="admin"), knobs=json.dumps(bad_knobs), spark_ui_hosts='["a/b"]')
    assert not form.is_valid()
    assert form.errors["knobs"] == api_errors["knobs"]
    assert form.errors["spark_ui_hosts"] == api_errors["spark_ui_hosts"]


@pytest.mark.django_db
def test_register_job_cli(capsys):
    call_command("register_job", "--name", "cli", "--spark-ui-host", "10.0.0.7", "--spark-ui-host", "*.svc.local",
                 "--spark-ui-ports", "4040-4041", "--knobs", json.dumps([KNOB]), "--mode", "auto",
                 "--policy", '{"max_cores": 3}')
    job = Job.objects.select_related("policy").get(name="cli")
    assert job.spark_ui_hosts == ["10.0.0.7", "*.svc.local"] and job.knobs == [STORED]
    assert (job.policy.mode, job.policy.max_cores) == ("auto", 3)
    assert "10.0.0.7, *.svc.local on ports 4040-4041" in capsys.readouterr().out
    refused = r"knobs: knob 1: knob 'enrich_partitions': needs 1 <= min <= default <= max"
    with pytest.raises(CommandError, match=refused):
        call_command("register_job", "--name", "cli2", "--knobs", json.dumps([{**KNOB, "min": 8, "max": 4}]))
    with pytest.raises(CommandError, match="policy.utilization_target"):
        call_command("register_job", "--name", "cli2", "--policy", '{"utilization_target": 7}')
    with pytest.raises(CommandError, match="policy.bogus: not a policy field"):
        call_command("register_job", "--name", "cli2", "--policy", '{"bogus": 1}')
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("register_job", "--name", "cli2", "--policy", '{"utilization_target": NaN}')
    assert not Job.objects.filter(name="cli2").exists()
    # Re-registering keeps what is not given.
    call_command("register_job", "--name", "cli", "--spark-ui-url", "http://driver:4040")
    job.refresh_from_db()
    assert job.spark_ui_url == "http://driver:4040" and job.knobs == [STORED]


@pytest.mark.django_db
def test_a_new_job_defaults_to_this_machines_spark_ui_ports():
    job = job_register(name="plain")
    assert (job.spark_ui_hosts, job.spark_ui_ports, job.spark_ui_url) == (["127.0.0.1", "localhost"], "4040-4056", "")
    assert isinstance(ui_target(job.ui_rule(), ui_url="http://127.0.0.1:4040", app_id=APP_ID), UiTarget)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(400)
def test_schemathesis_with_an_admin_token_finds_no_server_error_in_the_job_writes(live_server, tmp_path):
    """The registration and policy endpoints fuzzed with the role that may write (the suite's
    schemathesis run uses an operator, who gets 403 on them)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    for name in ("alpha", "beta"):
        job_register(name=name, knobs=[KNOB])
    token = Token.objects.create(user=make_user("fuzz-admin", role="admin"))
    artifacts = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).with_name("st")), "run", f"{live_server.url}/api/schema/",
               "--url", live_server.url, "--header", f"Authorization: Token {token.key}",
               "--include-path-regex", "^/api/jobs/", "--include-method-regex", "^(POST|PATCH)$",
               "--checks", "not_a_server_error", "--phases", "examples,coverage,fuzzing",
               "--max-examples", "25", "--workers", "1", "--seed", "271", "--request-timeout", "20",
               "--generation-allow-x00", "true"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=360, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""})
    (artifacts / "schemathesis-admin-jobs.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert re.search(r"\d+ generated, \d+ passed", done.stdout), done.stdout[-3000:]
    assert Job.objects.count() > 2  # some generated registrations were valid and were saved


@hyp_settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.none(), st.integers()))
def test_host_and_port_parsers_return_a_value_or_their_typed_error(value):
    for parse in (parse_host_pattern, parse_port_range, parse_origin):
        try:
            parse(value)
        except SparkUiError:
            pass


@pytest.mark.django_db
def test_the_admin_registers_a_job_with_its_policy(client):
    client.force_login(make_user("site-admin", role="admin"))
    form = {"name": "from-admin", "query_name": "", "topic": "", "config": "{}", "knobs": json.dumps([KNOB]),
            "spark_ui_url": "", "spark_ui_hosts": '["driver-host"]', "spark_ui_ports": "4040",
            "health": "collecting", "last_error": "", "health_reason": "{}",
            "scaler_state": "{}", "plan_stages": "[]", "capacity": "0",
            "config_changed_at_0": "", "config_changed_at_1": "",
            "policy-TOTAL_FORMS": "0", "policy-INITIAL_FORMS": "0", "policy-MIN_NUM_FORMS": "0",
            "policy-MAX_NUM_FORMS": "1"}
    refused = client.post("/admin/jobs/job/add/", {**form, "spark_ui_hosts": '["a/b"]'})
    assert refused.status_code == 200 and not Job.objects.exists()
    errors = refused.context["adminform"].form.errors
    assert list(errors) == ["spark_ui_hosts"] and "a/b" in errors["spark_ui_hosts"][0], errors
    done = client.post("/admin/jobs/job/add/", form)
    assert done.status_code == 302, done.content.decode()[:3000]
    job = Job.objects.get(name="from-admin")
    assert job.knobs == [STORED] and job.spark_ui_hosts == ["driver-host"]
    assert JobPolicy.objects.get(job=job).mode == "manual"


@pytest.mark.django_db
def test_a_runner_cannot_widen_the_registered_knob_bounds(workflow_redis):
    """Knob declarations read from Redis are adopted on first use only; afterwards a runner (or whoever
    writes Redis) declaring wider bounds is refused and nothing is adopted."""
    from sparkclient.contract import keys
    from sparkclient.contract.spec import Knob, KnobTarget, knobs_to_json
    from tests.webapp.factories import KNOBS, make_job
    from webapp.loop.collect import snapshot_collect

    redis_client = workflow_redis
    job = make_job(name="bounded")
    wider = [Knob.from_dict({**k, "max": 999}) if k["sets"] == "executors" else Knob.from_dict(k) for k in KNOBS]
    redis_client.hset(keys.runner(job.name), mapping={"state": "running", "knob_specs": knobs_to_json(wider),
                                                      "knobs": '{"cores": 500}', "ui_url": "http://127.0.0.1:4040",
                                                      "app_id": "local-1"})
    assert snapshot_collect(job=job) is None
    job.refresh_from_db()
    assert job.health == "down" and "cores" in job.last_error and "re-register" in job.last_error
    assert job.config["cores"] == 1 and max(k["max"] for k in job.knobs if k["sets"] == KnobTarget.EXECUTORS) == 8


@pytest.mark.django_db
def test_a_nul_in_the_topic_or_query_name_is_refused_as_the_schema_says(admin_api):
    """DRF refuses a NUL character in text; the schema states it (a pattern), so a client knows."""
    schema = admin_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for name in ("JobRegisterRequest", "PatchedJobUpdateRequest"):
        properties = schema["components"]["schemas"][name]["properties"]
        for field in ("topic", "query_name"):
            assert properties[field]["oneOf"][0]["pattern"] == "^[^\\u0000]+$", (name, field)
    job = _post(admin_api, {"name": "nul"}).json()
    for field in ("topic", "query_name"):
        refused = _patch(admin_api, f"/api/jobs/{job['id']}/", {field: "a\x00b"})
        assert refused.status_code == 400 and field in refused.json(), refused.content
    assert _patch(admin_api, f"/api/jobs/{job['id']}/", {"topic": ""}).status_code == 200
