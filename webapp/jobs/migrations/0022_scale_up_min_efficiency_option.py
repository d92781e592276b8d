"""The diminishing-returns option from ``scaling.policy.options.OPTIONS``: cores are added only while each step
brings at least ``scale_up_min_efficiency`` (0.3) of the gain linear scaling would bring. Existing jobs
take the default."""


import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0021_verification_tolerance_capacity_error'),
    ]

    operations = [
        migrations.AddField(
            model_name='jobpolicy',
            name='scale_up_min_efficiency',
            field=models.FloatField(default=0.3, help_text="Micro-batch: cores are added only while each step brings at least this share of the gain linear scaling would bring to the predicted utilization at the target rate: (U(c) − U(c′)) / (U(c) × (1 − c/c′)) ≥ this, looking up to twice c for the next count that changes a stage's task slots. A job that scales linearly scores 1 at any size and is never stopped; a job held by a pinned or bounded stage scores the share of U the other stages carry (Amdahl), so the plan stops where that share falls below this (diminishing-returns). 0 adds every core that lowers U. Flink has no such key: its JobVertexScaler divides the scale factor by the observed scaling coefficient, which makes a sub-linear vertex ask for more, not fewer, instances. From 0 to 1.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
    ]
