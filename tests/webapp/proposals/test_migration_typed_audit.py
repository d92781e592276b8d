"""Migrations ``proposals.0006``/``0007``: stored audit events and holds written as free text are
kept, as codes: a username becomes the user (when one of that name exists), a policy or the system
stays a name, a free-text reason becomes ``legacy-text`` with the text as data, and an execution
path spelled the old way takes the runner's value."""

import importlib

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.webapp.factories import make_job, make_user

migration = importlib.import_module("webapp.proposals.migrations.0006_typed_audit_and_paths")

BEFORE = ("proposals", "0005_execution_rescale_cost")


def test_names_and_texts_convert():
    users = {"ada": 7}
    assert [migration.actor_user_id(name, users) for name in ("ada", "bob", "system", "system:reconcile",
                                                                "policy:ds2")] == [7, None, None, None, None]
    assert migration.legacy("the job was re-registered") == {"code": "legacy-text",
                                                             "data": {"text": "the job was re-registered"}}
    assert migration.legacy("") == {}
    assert migration.legacy_back(migration.legacy("peak is over")) == "peak is over"
    assert [migration.path(p) for p in ("in_process", "driver-restart", "restart", "")] == [
        "in-process", "driver-restart", "driver-restart", ""]


@pytest.mark.django_db(transaction=True)
def test_the_migration_converts_stored_rows():
    from webapp.proposals.models import AuditEvent, Execution, Proposal

    job = make_job()
    ada = make_user("ada")
    executor = MigrationExecutor(connection)
    call_command("migrate", "proposals", BEFORE[1], verbosity=0)
    try:
        old = executor.loader.project_state(BEFORE).apps
        proposal = old.get_model("proposals", "Proposal").objects.create(
            job_id=job.pk, hold_reason="guardrail guard_max_executors: 9 executors (cores) exceed the quota of 8")
        old.get_model("proposals", "Execution").objects.create(proposal_id=proposal.pk, path="in_process")
        events = old.get_model("proposals", "AuditEvent").objects
        events.create(job_id=job.pk, proposal_id=proposal.pk, actor="ada", action="rejected", reason="peak is over")
        events.create(job_id=job.pk, proposal_id=proposal.pk, actor="policy:ds2", action="auto_approve_held")
        events.create(job_id=job.pk, actor="gone", action="policy_changed", reason="policy edited")
    finally:
        call_command("migrate", verbosity=0)  # every app: going back unapplied later ones of others
    rows = {e.actor_name: e for e in AuditEvent.objects.filter(job=job)}
    assert (rows["ada"].actor_user, rows["ada"].reason) == (ada, {"code": "legacy-text",
                                                                  "data": {"text": "peak is over"}})
    assert (rows["policy:ds2"].actor_user, rows["policy:ds2"].reason) == (None, {})
    assert rows["gone"].actor_user is None and rows["gone"].reason_text == "policy edited"
    held = Proposal.objects.get(pk=proposal.pk)
    assert held.hold_reason["code"] == "legacy-text" and held.hold_text.startswith("guardrail guard_max_executors")
    assert Execution.objects.get(proposal=held).path == Execution.Path.IN_PROCESS
