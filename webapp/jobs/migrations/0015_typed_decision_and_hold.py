"""``Evaluation.decision`` takes ``scaling.values.reasons.Decision``'s values and ``Evaluation.hold`` the
``EvaluationHold`` codes (choices); stored spellings of a decision with an underscore are mapped."""

from django.db import migrations, models

DECISION_ALIASES = {"no_change": "no-change", "nochange": "no-change"}


def forward(apps, schema_editor):
    evaluation = apps.get_model("jobs", "Evaluation")
    for old, new in DECISION_ALIASES.items():
        evaluation.objects.filter(decision=old).update(decision=new)


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0014_policy_options_from_one_table'),
    ]

    operations = [
        migrations.AlterField(
            model_name='evaluation',
            name='decision',
            field=models.CharField(choices=[('scale', 'scale'), ('no-change', 'no-change'), ('blocked', 'blocked')], max_length=20),
        ),
        migrations.AlterField(
            model_name='evaluation',
            name='hold',
            field=models.CharField(blank=True, choices=[('', 'not held'), ('awaiting_verification', 'awaiting verification'), ('restart_catch_up', 'restart catch-up'), ('scale_up_blocked', 'scale-up blocked')], default='', max_length=40),
        ),
        migrations.RunPython(forward, migrations.RunPython.noop),
    ]
