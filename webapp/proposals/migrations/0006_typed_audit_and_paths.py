"""Audit actions, execution paths and reasons become codes: ``AuditEvent.actor`` (a free string)
becomes ``actor_user`` (the user, when a user of that name exists) and ``actor_name``; the free-text
``AuditEvent.reason`` and ``Proposal.hold_reason`` become ``{"code": ..., "data": {...}}`` (a stored
text is kept as ``{"code": "legacy-text", "data": {"text": ...}}``); ``Execution.path`` takes the
runner's ``RescalePath`` values. The old columns are dropped in ``0007`` (PostgreSQL refuses to alter
a table with pending trigger events in the transaction that updated it)."""

from django.conf import settings
from django.db import migrations, models
import django.db.models.deletion

LEGACY_TEXT = "legacy-text"
#: Spellings of the runner's paths that older versions may have stored.
PATH_ALIASES = {"in_process": "in-process", "inprocess": "in-process", "in_place": "in-place",
                "restart": "driver-restart", "driver_restart": "driver-restart", "handover": "driver-handover",
                "driver_handover": "driver-handover"}
NON_HUMAN_PREFIXES = ("system", "policy:")


def legacy(text):
    """A free text as a coded reason; ``{}`` for none."""
    return {"code": LEGACY_TEXT, "data": {"text": text}} if text else {}


def legacy_back(reason):
    """A coded reason back to one text (the legacy text, else the code)."""
    reason = reason or {}
    return (reason.get("data") or {}).get("text") or reason.get("code") or ""


def path(old):
    """The runner's value (``RescalePath``) for a stored path."""
    return PATH_ALIASES.get((old or "").strip().lower(), old or "")


def actor_user_id(name, users):
    """The id of the user called ``name``; None for the system, a policy or an unknown name."""
    if not name or name.startswith(NON_HUMAN_PREFIXES):
        return None
    return users.get(name)


def forward(apps, schema_editor):
    app, model = settings.AUTH_USER_MODEL.split(".")
    user_model = apps.get_model(app, model)
    users = dict(user_model.objects.values_list("username", "pk"))  # django.contrib.auth's User
    audit_event = apps.get_model("proposals", "AuditEvent")
    events = list(audit_event.objects.all())
    for event in events:
        event.actor_name = event.actor
        event.actor_user_id = actor_user_id(event.actor, users)
        event.reason = legacy(event.reason_legacy)
    audit_event.objects.bulk_update(events, ["actor_name", "actor_user", "reason"], batch_size=500)
    proposal_model = apps.get_model("proposals", "Proposal")
    proposals = list(proposal_model.objects.exclude(hold_reason_legacy=""))
    for proposal in proposals:
        proposal.hold_reason = legacy(proposal.hold_reason_legacy)
    proposal_model.objects.bulk_update(proposals, ["hold_reason"], batch_size=500)
    execution_model = apps.get_model("proposals", "Execution")
    for old, new in PATH_ALIASES.items():
        execution_model.objects.filter(path=old).update(path=new)


def backward(apps, schema_editor):
    audit_event = apps.get_model("proposals", "AuditEvent")
    events = list(audit_event.objects.all())
    for event in events:
        event.actor = event.actor_name
        event.reason_legacy = legacy_back(event.reason)
    audit_event.objects.bulk_update(events, ["actor", "reason_legacy"], batch_size=500)
    proposal_model = apps.get_model("proposals", "Proposal")
    proposals = list(proposal_model.objects.exclude(hold_reason={}))
    for proposal in proposals:
        proposal.hold_reason_legacy = legacy_back(proposal.hold_reason)
    proposal_model.objects.bulk_update(proposals, ["hold_reason_legacy"], batch_size=500)


REASON_HELP = ('{"code": ..., "data": {...}} (webapp.proposals.codes; the text is webapp.proposals.reason_text); '
               '{} for none.')


class Migration(migrations.Migration):

    dependencies = [
        ('proposals', '0005_execution_rescale_cost'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='actor_user',
            field=models.ForeignKey(blank=True, help_text='The person who acted; empty for the system and the policy.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='auditevent',
            name='actor_name',
            field=models.CharField(default='', help_text='Who acted, as shown: the username, "policy:<name>" or "system[:<part>]" (webapp.proposals.codes.Actor).', max_length=150),
            preserve_default=False,
        ),
        migrations.RenameField(model_name='auditevent', old_name='reason', new_name='reason_legacy'),
        migrations.AddField(
            model_name='auditevent',
            name='reason',
            field=models.JSONField(blank=True, default=dict, help_text=REASON_HELP),
        ),
        migrations.RenameField(model_name='proposal', old_name='hold_reason', new_name='hold_reason_legacy'),
        migrations.AddField(
            model_name='proposal',
            name='hold_reason',
            field=models.JSONField(blank=True, default=dict, help_text='auto mode: why the policy did not approve it (a HoldCode or the GuardrailCode it breaks), so it waits for a person. ' + REASON_HELP),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='action',
            field=models.CharField(choices=[('proposed', 'proposed'), ('revised', 'revised'), ('approved', 'approved'), ('rejected', 'rejected'), ('superseded', 'superseded'), ('expired', 'expired'), ('withdrawn', 'withdrawn'), ('executing', 'executing'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('rolling_back', 'rolling back'), ('rolled_back', 'rolled back'), ('auto_approve_held', 'auto-approval held'), ('auto_approve_suspended', 'auto-approval suspended'), ('auto_approve_resumed', 'auto-approval resumed'), ('attempt_started', 'attempt started'), ('attempt_failed', 'attempt failed'), ('late_answer', 'late answer'), ('config_changed', 'configuration changed'), ('reconciled', 'reconciled'), ('verification_verified', 'verified'), ('verification_ineffective', 'verified ineffective'), ('verification_inconclusive', 'verification inconclusive'), ('scale_up_blocked', 'scale-ups blocked'), ('scale_up_block_cleared', 'scale-up block cleared'), ('job_changed', 'registration changed'), ('policy_changed', 'policy changed')], max_length=50),
        ),
        migrations.AlterField(
            model_name='execution',
            name='path',
            field=models.CharField(blank=True, choices=[('none', 'none'), ('in-place', 'in-place'), ('in-process', 'in-process'), ('driver-restart', 'driver-restart'), ('driver-handover', 'driver-handover')], help_text='How the runner applied it (sparkclient.contract.control.RescalePath); empty while it runs.', max_length=30),
        ),
        migrations.RunPython(forward, backward),
    ]
