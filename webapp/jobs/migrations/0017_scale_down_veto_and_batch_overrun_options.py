"""The measured signals' options, from ``scaling.policy.options.OPTIONS``: SPARK-12133's batch ratio and the
backlog growth veto scale-downs (``scale_down_veto_batch_ratio`` 0.9, ``scale_down_veto_backlog_growth``
0.05), a persistent overrun scales up (``batch_overrun_ratio`` 1.0). Existing jobs take the defaults."""


import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0016_metric_rollups'),
    ]

    operations = [
        migrations.AddField(
            model_name='jobpolicy',
            name='batch_overrun_ratio',
            field=models.FloatField(default=1.0, help_text='While the load is inside the utilization band, every batch of the window (at least 2) running longer than this × the trigger interval while the backlog grows beyond scale_down_veto_backlog_growth is a scale-up trigger (batch-overrun): the cores grow to bring R to utilization_target, linearly (DS2). Long batches with a steady backlog keep up (the next batch starts at once and covers more data): no trigger. 1 = the batch overruns its trigger. Flink has no such key (see scale_down_veto_batch_ratio). From 0 to 100.', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(100.0)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='scale_down_veto_backlog_growth',
            field=models.FloatField(default=0.05, help_text="No scale-down while the sources' backlog grows faster than this share of their input rate (records/s per records/s; scale-down-vetoed). Up to it the growth is noise: the difference of two rates sampled at batch boundaries, which jitter by a few percent between windows. A source with no input vetoes at any growth. Flink has no such key: FLIP-271 counts the growth in TARGET_DATA_RATE only. From 0 to 1.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='scale_down_veto_batch_ratio',
            field=models.FloatField(default=0.9, help_text="No scale-down (fewer executors, or a stage on fewer task slots min(tasks, cores)) while the window's batch ratio R = mean batch duration / trigger interval is at or above this (scale-down-vetoed). The value of Spark's spark.streaming.dynamicAllocation.scalingUpRatio (SPARK-12133), the ratio at which Spark adds executors. Flink has no such key: its operators run continuously, with no trigger interval for a batch to overrun, so its autoscaler reads busy time and backpressure only; a micro-batch that overruns its trigger delays every later batch, the first sign Spark itself acts on. From 0 to 100.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(100.0)]),
        ),
    ]
