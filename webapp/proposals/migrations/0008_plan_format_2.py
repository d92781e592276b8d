"""Stored plans to format 2 (as ``jobs.0018_plan_format_2``): ``Proposal.plan``, ``Proposal.reasons``
and the reasons of each earlier revision (``Proposal.revisions``); and ``Execution.result``, stored
as the web app's own dict of a runner's answer (its knobs under ``config``; the failures it recorded
itself without an id), becomes the control protocol's ``RescaleResult`` JSON. A value that does not
read is left as it is. The reverse keeps the new shapes (they read as well)."""

import importlib
import json
import logging

from django.db import migrations

from sparkclient.contract.messages import MAX_TEXT, ProtocolError, RescaleResult

logger = logging.getLogger(__name__)
_jobs = importlib.import_module("webapp.jobs.migrations.0018_plan_format_2")


def revisions_v2(revisions):
    """Each earlier revision with its reasons as ``Reason.to_json`` items."""
    if not isinstance(revisions, list):
        return revisions
    return [{**r, "reasons": _jobs.reasons_v2(r["reasons"])} if isinstance(r, dict) and "reasons" in r else r
            for r in revisions]


def result_v2(result, command_id, completed_at):
    """An execution's stored answer as ``RescaleResult`` JSON: ``config`` becomes ``knobs``, a failure
    the web app recorded itself gets the attempt's command id, path ``none``, no downtime."""
    if not result or "config" not in result and "id" in result:
        return result
    old = dict(result)
    new = {"id": old.pop("id", None) or command_id, "knobs": old.pop("config", None), "path": "none",
           "downtime_s": 0.0, "pause_s": 0.0, "completed_at": completed_at}
    new.update({k: v for k, v in old.items() if v is not None})
    new["error"] = str(new.get("error") or "")[:MAX_TEXT]
    try:
        return json.loads(RescaleResult.from_json(json.dumps(new)).to_json())
    except ProtocolError as exc:
        logger.warning("execution result left as it is: %s", exc)
        return result


def proposals_to_format_2(apps, schema_editor):
    Proposal = apps.get_model("proposals", "Proposal")
    for proposal in Proposal.objects.all().iterator(chunk_size=500):
        plan, reasons = _jobs.plan_v2(proposal.plan), _jobs.reasons_v2(proposal.reasons)
        revisions = revisions_v2(proposal.revisions)
        if (plan, reasons, revisions) != (proposal.plan, proposal.reasons, proposal.revisions):
            Proposal.objects.filter(pk=proposal.pk).update(plan=plan, reasons=reasons, revisions=revisions)
    Execution = apps.get_model("proposals", "Execution")
    for execution in Execution.objects.all().iterator(chunk_size=500):
        at = execution.finished_at or execution.started_at
        result = result_v2(execution.result, f"proposal-{execution.proposal_id}-attempt-{execution.attempts or 1}",
                           at.timestamp() if at else 0.0)
        if result != execution.result:
            Execution.objects.filter(pk=execution.pk).update(result=result)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0018_plan_format_2"),
        ("proposals", "0007_typed_audit_drop_free_text"),
    ]

    operations = [
        migrations.RunPython(proposals_to_format_2, migrations.RunPython.noop),
    ]
