"""The REST API: endpoints, filters, pagination, decisions, the OpenAPI schema, /metrics."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token

from scaling.values.plan import PLAN_FORMAT
from scaling.values.reasons import PlanReason
from scaling.words.reason_text import LOAD_NAME, reason_text
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client):
    token = Token.objects.create(user=make_user("api-operator"))
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


def test_every_endpoint_needs_auth_and_lists_are_paginated(client, api):
    job = make_job()
    make_snapshots(job, count=3)
    for url in ("/api/jobs/", "/api/vertices/", "/api/snapshots/", "/api/proposals/", "/api/executions/",
                "/api/audit-events/"):
        body = api.get(url).json()
        assert {"count", "next", "previous", "results"} <= set(body), url
    anonymous = type(client)()
    for url in ("/api/jobs/", "/api/schema/", "/api/docs/", "/metrics"):
        assert anonymous.get(url).status_code in (401, 403), url


def test_snapshots_and_vertices_filter_by_job_and_time(api):
    job, other = make_job("a"), make_job("b")
    now = timezone.now()
    make_snapshots(job, count=8, end=now)
    make_snapshots(other, count=2, end=now)
    since = (now - timedelta(seconds=31)).isoformat()
    body = api.get("/api/snapshots/", {"job": job.pk, "since": since}).json()
    assert body["count"] == 3 and all(s["job"] == job.pk for s in body["results"])
    until = (now - timedelta(seconds=100)).isoformat()
    assert api.get("/api/snapshots/", {"job": job.pk, "until": until}).json()["count"] == 1
    vertices = api.get("/api/vertices/", {"job": job.pk, "vertex_id": "v1", "since": since}).json()
    assert vertices["count"] == 3 and {v["vertex_id"] for v in vertices["results"]} == {"v1"}
    assert vertices["results"][0]["collected_at"] >= vertices["results"][-1]["collected_at"]


@pytest.mark.parametrize("query", [{"job": "abc"}, {"since": "yesterday"}, {"since": "2024-13-45T99:00:00"},
                                   {"job": "0"}, {"until": "\x00"}])
def test_malformed_filters_are_400_not_500(api, query):
    for url in ("/api/snapshots/", "/api/vertices/"):
        assert api.get(url, query).status_code == 400
    assert api.get("/api/proposals/", {"status": "nonsense"}).status_code == 400


def test_approve_reject_rollback_actions(api, monkeypatch):
    import webapp.loop.tasks as tasks

    for name in dir(tasks):
        if hasattr(getattr(tasks, name), "delay"):
            monkeypatch.setattr(getattr(tasks, name), "delay", lambda *a, **k: None)
            monkeypatch.setattr(getattr(tasks, name), "apply_async", lambda *a, **k: None)
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    pending = api.get("/api/proposals/", {"job": job.pk, "status": "pending"}).json()["results"][0]
    assert api.post(f"/api/proposals/{pending['id']}/reject/", {"comment": ""}).status_code == 400
    assert api.post(f"/api/proposals/{pending['id']}/approve/").json()["status"] == "approved"
    assert api.post(f"/api/proposals/{pending['id']}/approve/").status_code == 409
    done = make_succeeded(job)
    # One execution per job at a time: no rollback while the approved proposal is queued.
    busy = api.post(f"/api/proposals/{done.pk}/rollback/", {"reason": "latency got worse"})
    assert busy.status_code == 409 and "one execution at a time" in busy.json()["detail"]
    assert api.get(f"/api/proposals/{done.pk}/").json()["status"] == "succeeded"
    Proposal.objects.filter(pk=pending["id"]).update(status="succeeded")
    response = api.post(f"/api/proposals/{done.pk}/rollback/", {"reason": "latency got worse"})
    assert response.status_code == 200, response.content
    rollback = response.json()
    assert rollback["kind"] == "rollback" and rollback["rollback_of"] == done.pk
    assert rollback["proposed_config"] == done.current_config
    # a rollback has no plan; its reason is the person's words, as a text reason
    assert rollback["plan"] == {} and [(r["code"], r["data"]) for r in rollback["reasons"]] == [
        (PlanReason.LEGACY_TEXT, {"text": "latency got worse"})]
    assert api.get(f"/api/proposals/{done.pk}/").json()["status"] == "rolling_back"
    assert api.post(f"/api/proposals/{pending['id']}/rollback/").status_code == 409  # not succeeded
    # The audit trail names the person and the reason as code, data and the text rendered from them.
    events = api.get("/api/audit-events/", {"proposal": done.pk, "action": "rolling_back"}).json()["results"]
    operator = events[0]["actor_user"]
    assert [(e["actor"], e["reason"]) for e in events] == [("api-operator", {
        "code": "comment", "data": {"text": "latency got worse"}, "text": "latency got worse"})] and operator
    assert api.get(f"/api/proposals/{done.pk}/").json()["hold_reason"] is None


@pytest.mark.parametrize("query", [{"page": "0"}, {"page": "x"}, {"page": ""}, {"page": "last"}, {"status": ""},
                                   {"job": ""}, {"action": ""}, {"action": "Approved!"}])
def test_malformed_page_and_blank_filters_are_400(api, query):
    """A blank ``page=`` or ``action=`` and a malformed page are a documented 400, not accepted or a 404."""
    url = "/api/audit-events/" if "action" in query else "/api/proposals/"
    response = api.get(url, query)
    assert response.status_code == 400, response.content
    assert set(response.json()) == set(query)


def test_api_404s_are_json_and_a_page_past_the_end_is_404(api):
    assert api.get("/api/proposals/", {"page": "2"}).json() == {"detail": "Invalid page."}
    for url in ("/api/jobs/abc/", "/api/jobs/1234567890123456789/", "/api/nowhere/"):
        response = api.get(url)
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}, url


def test_schema_documents_errors_nullable_fields_and_integer_ids(api):
    """400/401/403/404 are documented; ``execution`` and ``decided_by`` are null until decided."""
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            success = "201" if method == "post" and not path.endswith("/{id}/") and "{id}" not in path else "200"
            expected = {success, "401", "403", "404"} | ({"400"} if method != "get" or "{id}" not in path else set())
            assert expected <= set(operation["responses"]), (method, path, operation["responses"].keys())
            for parameter in operation.get("parameters", ()):
                if parameter["in"] == "path":
                    assert parameter["schema"]["type"] == "integer", (path, parameter)
    proposal = schema["components"]["schemas"]["Proposal"]["properties"]
    assert proposal["decided_by"]["nullable"] and proposal["execution"]["nullable"]


def test_openapi_schema_validates_and_swagger_ui_is_served_locally(api):
    from drf_spectacular.validation import validate_schema

    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in ("/api/jobs/", "/api/vertices/", "/api/snapshots/", "/api/proposals/{id}/approve/",
                 "/api/proposals/{id}/reject/", "/api/proposals/{id}/rollback/", "/api/executions/",
                 "/api/audit-events/"):
        assert path in paths, path
    assert {"since", "until", "job"} <= {p["name"] for p in paths["/api/snapshots/"]["get"]["parameters"]}
    docs = api.get("/api/docs/").content.decode()
    # served from our static files, nothing from a CDN (the page's CSRF token is random text, which
    # once held the letters "cdn": look at what the page loads, not at any substring)
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", docs), "the docs page loads from another host"
    assert "cdn.jsdelivr" not in docs and "unpkg.com" not in docs
    assert api.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").status_code == 200


def test_metrics_exposes_flip271_scaling_metrics_and_status_gauges(api):
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    make_succeeded(job)
    response = api.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    for name in ("sparkscaler_vertex_utilization", "sparkscaler_vertex_true_processing_rate",
                 "sparkscaler_vertex_target_data_rate", "sparkscaler_vertex_recommended_parallelism",
                 "sparkscaler_job_backlog_records"):
        assert name in families, name
    utilization = {s.labels["vertex"]: s.value for s in families["sparkscaler_vertex_utilization"].samples}
    assert set(utilization) == {"v0", "v1", "v2"} and all(0 <= u for u in utilization.values())
    backlog = families["sparkscaler_job_backlog_records"].samples[0]
    assert backlog.labels == {"job": "demo"} and backlog.value == 8000
    # Counts of the current status go down as proposals move on: gauges, not counters.
    assert families["sparkscaler_proposals"].type == "gauge" and families["sparkscaler_executions"].type == "gauge"
    proposals = {(s.labels["status"], s.value) for s in families["sparkscaler_proposals"].samples}
    assert ("pending", 1) in proposals and ("succeeded", 1) in proposals
    executions = {(s.labels["outcome"], s.value) for s in families["sparkscaler_executions"].samples}
    assert executions == {("succeeded", 1)}


def test_vertices_carry_the_stage_name_the_dashboard_shows(api):
    """One stage name in the graph, the proposal, the charts and the API."""
    from webapp.dashboard.reads import job_stage_names

    job = make_job()
    make_snapshots(job, count=1)
    rows = api.get("/api/vertices/", {"job": job.pk}).json()["results"]
    assert {r["vertex_id"]: r["stage"] for r in rows} == job_stage_names(job=job) == \
        {"v0": "stage 0", "v1": "stage 1", "v2": "stage 2"}


def test_a_proposal_gives_the_figures_the_pages_state(api, client):
    """Capacity now and expected, the needed utilization and its band, the cores needed: the numbers
    and words the proposal page shows (``webapp.jobs.figures``), and the capacity its prediction froze."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    figures = api.get(f"/api/proposals/{proposal.pk}/").json()["figures"]
    assert figures["capacity_expected_per_s"] == pytest.approx(proposal.prediction["capacity_per_s"], rel=1e-4)
    assert figures["load"] == pytest.approx(proposal.job_plan.load, abs=1e-3) and figures["load_name"] == LOAD_NAME
    assert figures["band"] == [0.4, 1.0] and figures["band_text"] == "[0.40, 1.00]"
    assert figures["cores_needed"]["needed"] == proposal.job_plan.cores_needed
    client.force_login(make_user("reader", role="viewer"))
    html = client.get(f"/proposals/{proposal.pk}/").content.decode()
    assert f'data-figure="band">{figures["band_text"]}<' in html
    assert f'>{figures["cores_needed"]["text"]}</span>' in html
    assert 'data-figure="capacity" ' in html and f'>{figures["capacity_now_per_s"]:.0f}</b>' in html


def test_a_proposal_gives_each_reason_its_code_data_and_words(api):
    """The plan's reasons are values: the API returns each one's code and data, and its words from
    ``scaling.words.reason_text`` (the one place they are rendered), in the reasons and inside the plan."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    body = api.get(f"/api/proposals/{proposal.pk}/").json()
    plan = proposal.job_plan
    assert [r["code"] for r in body["reasons"]] == [str(r.code) for r in plan.reasons]
    assert body["reasons"][0]["code"] == PlanReason.LOAD_ABOVE_BAND
    assert body["reasons"][0]["data"]["load"] == plan.reasons[0].data["load"] > 1.0
    assert [r["text"] for r in body["reasons"]] == [reason_text(r) for r in plan.reasons]
    assert body["plan"]["format"] == PLAN_FORMAT and body["plan"]["reasons"] == body["reasons"]
    assert [v["vertex_id"] for v in body["plan"]["vertices"]] == [v.vertex_id for v in plan.vertices]
    for row, vertex in zip(body["plan"]["vertices"], plan.vertices):
        expected = None if vertex.reason is None else {**vertex.reason.to_json(), "text": reason_text(vertex.reason)}
        assert row["reason"] == expected
