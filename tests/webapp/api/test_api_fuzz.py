"""Schemathesis against the live API with a valid token: every operation of the OpenAPI schema, the
examples, coverage, fuzzing and stateful phases, malformed input too, and ALL of schemathesis' checks
(status codes, content types and bodies conform to the schema, bad input is rejected, good input
accepted). The stateful phase follows the links between operations, the schema's own
(``webapp.api.links``) and those schemathesis infers, with answers' ids as the next request's. Every
operation must get at least one 2xx: the test seeds objects and hands their ids to schemathesis (a
dictionary per operation, used for half of the generated ids), so the detail endpoints, approve,
reject and rollback reach real objects. Generation is deterministic (no seed, no example database):
each run sends the same cases to the same seeded data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.repo import ROOT
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Job, MetricSnapshot, VertexSnapshot
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import AuditEvent, Execution, Proposal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "test-artifacts"))

#: Makes positive bodies of the registration and policy edits satisfy the rules between fields the
#: schema's descriptions state (the server's own ``clean()``); every check stays on.
HOOKS = "tests.webapp.api.schemathesis_hooks"


def _seed() -> dict[str, list[int]]:
    """Two jobs with snapshots, a pending proposal each and a succeeded one: the ids of each kind."""
    for name in ("alpha", "beta"):
        job = make_job(name, metric_window_s=45)
        make_snapshots(job, count=6)
        evaluation_run(job=job)
        make_succeeded(job)
    pending = list(Proposal.objects.filter(status=Proposal.Status.PENDING).order_by("id").values_list("id", flat=True))
    succeeded = list(Proposal.objects.filter(status=Proposal.Status.SUCCEEDED).values_list("id", flat=True))
    assert len(pending) == 2 and len(succeeded) == 2, (pending, succeeded)
    return {
        "jobs": list(Job.objects.values_list("id", flat=True)),
        "snapshots": list(MetricSnapshot.objects.values_list("id", flat=True)),
        "vertices": list(VertexSnapshot.objects.values_list("id", flat=True)),
        "proposals": list(Proposal.objects.values_list("id", flat=True)),
        "executions": list(Execution.objects.values_list("id", flat=True)),
        "audit-events": list(AuditEvent.objects.values_list("id", flat=True)),
        # one pending proposal to approve, the other to reject, the succeeded ones to roll back
        "approve": pending[:1], "reject": pending[1:], "rollback": succeeded,
    }


def _config(ids: dict[str, list[int]]) -> str:
    """A schemathesis.toml: per operation, a dictionary of valid ids used for half of the ``id``s
    (the other half stay generated, so malformed and unknown ids are still tried)."""
    # The stateful phase: 80 scenarios of at most 12 steps (about 40 of the 78 links followed).
    lines = ["[phases.stateful]", "max-steps = 12", "", "[phases.stateful.generation]", "max-examples = 80", ""]
    for name, values in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    paths = {name: f"/api/proposals/{{id}}/{name}/" if name in ("approve", "reject", "rollback")
             else f"/api/{name}/{{id}}/" for name in ids}
    for name, path in [*paths.items(), ("jobs", "/api/jobs/{id}/policy/")]:
        lines += ["[[operations]]", f'include-path = "{path}"',
                  f'parameters = {{ "path.id" = {{ dictionary = "{name}", probability = 0.5 }} }}', ""]
    return "\n".join(lines)


def _statuses(report: Path) -> dict[str, dict[str, set[int]]]:
    """The response statuses per operation and phase, from schemathesis' NDJSON event stream."""
    seen: dict[str, dict[str, set[int]]] = {}
    for line in report.read_text().splitlines():
        finished = json.loads(line).get("ScenarioFinished")
        if not finished:
            continue
        by_phase = seen.setdefault(finished["recorder"]["label"], {})
        for interaction in finished["recorder"].get("interactions", {}).values():
            if interaction.get("response"):
                by_phase.setdefault(finished["phase"], set()).add(interaction["response"]["status_code"])
    return seen


def _links_followed(report: Path) -> dict[bool, set[str]]:
    """The links the stateful phase followed (a transition applied), by whether schemathesis inferred them."""
    followed: dict[bool, set[str]] = {True: set(), False: set()}
    for line in report.read_text().splitlines():
        finished = json.loads(line).get("ScenarioFinished")
        if not finished or finished["phase"] != "stateful":
            continue
        for case in finished["recorder"].get("cases", {}).values():
            if case.get("is_transition_applied") and case.get("transition"):
                followed[case["transition"]["is_inferred"]].add(case["transition"]["id"])
    return followed


def test_schemathesis_conforms_and_reaches_every_operation(live_server, no_enqueue, tmp_path, settings):
    # DEBUG on, as in the demo: Django's own 404 and error pages are HTML then, so every answer under
    # /api/ must still be the API's JSON.
    settings.DEBUG = True
    ids = _seed()
    # The admin role: it may also register jobs and edit them and their policies (PATCH).
    token = Token.objects.create(user=make_user("fuzzer", role="admin"))
    (tmp_path / "schemathesis.toml").write_text(_config(ids))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    junit, events = ARTIFACTS / "schemathesis-junit.xml", ARTIFACTS / "schemathesis-events.ndjson"
    command = [str(Path(sys.executable).with_name("st")), "run", f"{live_server.url}/api/schema/",
               "--url", live_server.url, "--header", f"Authorization: Token {token.key}",
               "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
               "--max-examples", "15", "--workers", "1", "--generation-deterministic", "--request-timeout", "20",
               "--generation-allow-x00", "true", "--report", "junit,ndjson",
               "--report-junit-path", str(junit), "--report-ndjson-path", str(events)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=840, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": HOOKS,
                               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    (ARTIFACTS / "schemathesis.log").write_text(done.stdout + done.stderr)
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    failures = {(case.get("name"), f.get("message")) for case in cases for f in case if f.tag in ("failure", "error")}
    print(f"schemathesis failures: {sorted(failures)}")
    assert not failures, done.stdout[-8000:] + done.stderr[-2000:]
    assert done.returncode == 0 or failures, done.stdout[-8000:] + done.stderr[-2000:]

    operations = [case.get("name") for case in cases]
    statuses = _statuses(events)
    summary = {op: {phase: sorted(codes) for phase, codes in statuses.get(op, {}).items()} for op in operations}
    (ARTIFACTS / "schemathesis-statuses.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    assert len(operations) >= 15, operations
    without_2xx = [op for op, phases in summary.items()
                   if not any(200 <= code < 300 for codes in phases.values() for code in codes)]
    assert not without_2xx, f"operations that never got a 2xx: {without_2xx}\n{summary}"
    assert any("examples" in phases for phases in summary.values()), "the examples phase ran no example"
    followed = _links_followed(events)
    print(json.dumps({"schema's links": sorted(followed[False]), "inferred": sorted(followed[True])}, indent=1))
    assert len(followed[False]) >= 5 and len(followed[True]) >= 10, followed
