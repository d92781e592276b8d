"""Every number the API answers is a number or null: an infinite one (a stage that was never busy has an
infinite true rate, a catch-up that never ends an infinite time) is null, never ``"inf"`` or a bare
``Infinity``, which JSON does not have. Checked on every GET operation of the OpenAPI schema, over a
proposal whose plan, reasons, limits, findings and prediction hold infinities and an execution whose
measured downtime is one."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest
from rest_framework.authtoken.models import Token

from scaling.values.findings import Finding, PinnedAction
from scaling.values.reasons import Limit, PlanLimit, PlanReason, Reason
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_pending, make_user
from webapp.jobs.plans import plan_fields
from webapp.proposals.models import AuditEvent, Execution, Proposal
from webapp.proposals.predictions import predict

pytestmark = pytest.mark.django_db

INF = math.inf
#: How a non-number may be spelled where a number belongs.
NOT_A_NUMBER = re.compile(r"^[+-]?(inf|infinity|nan)$", re.IGNORECASE)


@pytest.fixture
def api(client):
    token = Token.objects.create(user=make_user("api-admin", role="admin"))
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


def with_infinities(proposal: Proposal) -> Proposal:
    """``proposal`` with its first stage's true rate infinite, an infinite figure in one of its reasons,
    a limit and a finding, and the prediction of that plan."""
    plan = proposal.job_plan
    first = plan.vertices[0]
    plan = replace(plan, vertices=(replace(first, true_processing_rate=INF), *plan.vertices[1:]),
                   reasons=(*plan.reasons, Reason(PlanReason.LOAD_ABOVE_BAND, data={
                       "load": INF, "low": 0.4, "high": 1.0, "need": INF, "cores": 1, "overhead": 0.1})),
                   limits=(PlanLimit(Limit.CATCH_UP_UNREACHABLE, None, {"catch_up_s": INF,
                                                                         "catch_up_duration_s": 120.0}),),
                   findings=(Finding(PinnedAction.REPARTITION_STATE, first.vertex_id, {"fill": INF}),))
    snapshot = proposal.job.snapshots.order_by("-collected_at").first()
    Proposal.objects.filter(pk=proposal.pk).update(
        **plan_fields(plan), prediction=predict(plan=plan, snapshot=snapshot, downtimes_s=[],
                                                configured_restart_s=15.0))
    return Proposal.objects.get(pk=proposal.pk)


def non_numbers(value, path="$") -> list[str]:
    """Where ``value`` (parsed JSON) holds an infinity or NaN, as a float or as a word."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, str):
        return [path] if NOT_A_NUMBER.match(value) else []
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in non_numbers(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in non_numbers(v, f"{path}[{i}]")]
    return []


def strict_json(body: bytes):
    """``body`` parsed as JSON proper: ``NaN``, ``Infinity`` and ``-Infinity`` are refused."""
    def refuse(token: str):
        raise ValueError(f"{token} is not JSON")
    return json.loads(body, parse_constant=refuse)


@pytest.fixture
def seeded():
    """A proposal with infinities (:func:`with_infinities`), and a succeeded execution of the same job whose
    measured downtime is infinite; returns the ids the schema's paths take, by their first segment."""
    proposal = with_infinities(make_pending())
    done = make_succeeded(proposal.job)
    Execution.objects.filter(proposal=done).update(downtime_s=INF)
    snapshot = proposal.job.snapshots.first()
    return {"jobs": proposal.job_id, "proposals": proposal.pk, "executions": done.execution.pk,
            "snapshots": snapshot.pk, "vertices": snapshot.vertices.first().pk,
            "audit-events": AuditEvent.objects.filter(job=proposal.job).first().pk}


def get_operations(api) -> list[str]:
    """The path of every GET operation of the API's OpenAPI schema."""
    schema = strict_json(api.get("/api/schema/", {"format": "json"}).content)
    return [path for path, item in schema["paths"].items() if "get" in item]


def test_every_get_operation_answers_numbers_or_null(api, seeded):
    paths = get_operations(api)
    assert len(paths) >= 12
    for path in paths:
        segment = path.removeprefix("/api/").split("/")[0]
        url = re.sub(r"\{(id|pk)\}", str(seeded.get(segment, 0)), path)
        response = api.get(url)
        assert response.status_code == 200, (url, response.status_code)
        if response["Content-Type"].startswith("application/json"):
            assert non_numbers(strict_json(response.content)) == [], url


def test_the_seeded_infinities_are_null_where_they_were(api, seeded):
    """The walk above is not empty-handed: each infinity put in is answered as null in its place."""
    proposal = api.get(f"/api/proposals/{seeded['proposals']}/").json()
    plan = proposal["plan"]
    assert plan["vertices"][0]["true_processing_rate"] is None
    assert plan["vertices"][1]["true_processing_rate"] > 0  # a finite rate stays a number
    assert plan["limits"][0]["data"] == {"catch_up_s": None, "catch_up_duration_s": 120.0}
    assert plan["findings"][0]["data"] == {"fill": None}
    assert [r["data"]["load"] for r in plan["reasons"]][-1] is None
    assert proposal["reasons"][-1]["data"]["need"] is None and proposal["reasons"][-1]["data"]["cores"] == 1
    assert proposal["prediction"]["inputs"]["vertices"][0]["true_processing_rate"] is None
    assert api.get(f"/api/executions/{seeded['executions']}/").json()["downtime_s"] is None


def test_the_stored_plan_still_reads_back_its_infinities(seeded):
    """The stored form keeps ``"inf"``, which the model reads back as infinity; only the API says null."""
    plan = Proposal.objects.get(pk=seeded["proposals"]).job_plan
    assert plan.vertices[0].true_processing_rate == INF and plan.limits[0].data["catch_up_s"] == INF
