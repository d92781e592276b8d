"""Drop the free-text columns ``0006`` converted (``AuditEvent.actor`` and ``reason``,
``Proposal.hold_reason``), in a transaction of their own."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('proposals', '0006_typed_audit_and_paths'),
    ]

    operations = [
        migrations.RemoveField(model_name='auditevent', name='actor'),
        migrations.RemoveField(model_name='auditevent', name='reason_legacy'),
        migrations.RemoveField(model_name='proposal', name='hold_reason_legacy'),
    ]
