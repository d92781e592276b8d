"""Stored plans to format 2: ``Evaluation.plan`` and the plan of ``Evaluation.held_scale_down`` become
``JobPlan.from_json(old).to_json()`` (the unversioned ``plan_as_json`` shape, whose reasons and
vertex notes were sentences, read as ``PlanReason.LEGACY_TEXT`` reasons), and ``Evaluation.reasons``
a list of ``Reason.to_json`` (a sentence becomes a legacy-text reason). A plan or reason that does
not read is left as it is (the pages show none). The reverse keeps format 2 (it reads as well)."""

import logging

from django.db import migrations

from scaling.values.plan import JobPlan
from scaling.values.reasons import PlanFormatError, Reason, legacy_text

logger = logging.getLogger(__name__)


def plan_v2(data):
    """A stored plan in format 2 (an empty one stays empty; one that does not read stays as it is)."""
    if not data:
        return data
    try:
        return JobPlan.from_json(data).to_json()
    except PlanFormatError as exc:
        logger.warning("plan left as it is: %s", exc)
        return data


def reasons_v2(data):
    """Stored reasons as ``Reason.to_json`` items (a sentence becomes a legacy-text reason)."""
    if not isinstance(data, list):
        return data
    out = []
    for item in data:
        try:
            out.append((legacy_text(item) if isinstance(item, str) else Reason.from_json(item)).to_json())
        except PlanFormatError as exc:
            logger.warning("reason left as it is: %s", exc)
            out.append(item)
    return out


def held_v2(held):
    """``Evaluation.held_scale_down`` with its plan in format 2."""
    if not isinstance(held, dict) or "plan" not in held:
        return held
    return {**held, "plan": plan_v2(held["plan"])}


def evaluations_to_format_2(apps, schema_editor):
    Evaluation = apps.get_model("jobs", "Evaluation")
    for evaluation in Evaluation.objects.all().iterator(chunk_size=500):
        plan, reasons = plan_v2(evaluation.plan), reasons_v2(evaluation.reasons)
        held = held_v2(evaluation.held_scale_down)
        if (plan, reasons, held) != (evaluation.plan, evaluation.reasons, evaluation.held_scale_down):
            Evaluation.objects.filter(pk=evaluation.pk).update(plan=plan, reasons=reasons, held_scale_down=held)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0017_scale_down_veto_and_batch_overrun_options"),
    ]

    operations = [
        migrations.RunPython(evaluations_to_format_2, migrations.RunPython.noop),
    ]
