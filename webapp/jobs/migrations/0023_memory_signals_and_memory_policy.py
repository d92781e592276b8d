"""Memory: each snapshot stores the window's GC share, heap at peak and maximum and the memory signals
(sparkclient.collector.memory); each job's policy gets the memory options of scaling.policy.options.OPTIONS (the
pressure gate's thresholds, the recommendation's overhead and bounds, and memory_apply, off: recommend-only).
Existing jobs and snapshots take the defaults (no memory measured)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0022_scale_up_min_efficiency_option'),
    ]

    operations = [
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_apply',
            field=models.BooleanField(default=False, help_text='job.autoscaler.memory.tuning.enabled: Off (recommend-only, the default): the job page and API show the memory recommendation and what it would save or fix; nothing restarts for it. On: the job opts into applying it with a rescale.'),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_gc_pressure_threshold',
            field=models.FloatField(default=0.3, help_text="job.autoscaler.memory.gc-pressure.threshold: Above this share of the window's task time spent in GC (Σ jvmGcTime / Σ executorRunTime) the job is under memory pressure (Flink ScalingExecutor.isJobUnderMemoryPressure): no scale-down, and a scale-up only with the pressure named. 1 turns the GC gate off. From 0 to 1.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_heap_usage_threshold',
            field=models.FloatField(default=1.0, help_text="job.autoscaler.memory.heap-usage.threshold: Above this heap used at its peak / the heap maximum (the mean over the metric window) the job is under memory pressure (as the GC threshold). Spark's peak counts garbage not yet collected, so a busy JVM nears 1 without pressure: 1 (Flink's default) turns the heap gate off. From 0 to 1.", validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_max_mb',
            field=models.PositiveIntegerField(default=65536, help_text='The largest heap recommended, MB. From 512 to 1048576 MB.', validators=[django.core.validators.MinValueValidator(512), django.core.validators.MaxValueValidator(1048576)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_min_mb',
            field=models.PositiveIntegerField(default=512, help_text='The smallest heap recommended, MB (Spark refuses a heap below 450 MB: 300 MB reserved × 1.5). From 512 to 1048576 MB.', validators=[django.core.validators.MinValueValidator(512), django.core.validators.MaxValueValidator(1048576)]),
        ),
        migrations.AddField(
            model_name='jobpolicy',
            name='memory_tuning_overhead',
            field=models.FloatField(default=0.2, help_text='job.autoscaler.memory.tuning.overhead: The recommended heap (spark.executor.memory, or spark.driver.memory in local mode) is the heap used at its peak × (1 + this), rounded up to 64 MB, within memory_min_mb and memory_max_mb. From 0 to 1.', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(1.0)]),
        ),
        migrations.AddField(
            model_name='metricsnapshot',
            name='gc_share',
            field=models.FloatField(blank=True, help_text="Share of the window's task time spent in GC (Σ jvmGcTime / Σ executorRunTime of its stages, 0..1); empty when unknown.", null=True),
        ),
        migrations.AddField(
            model_name='metricsnapshot',
            name='heap_max_bytes',
            field=models.BigIntegerField(blank=True, help_text="The executors' heap maximum, bytes; empty when unknown.", null=True),
        ),
        migrations.AddField(
            model_name='metricsnapshot',
            name='heap_peak_bytes',
            field=models.BigIntegerField(blank=True, help_text="Heap used at its peak in the window (JVMHeapMemory of its stages' peakExecutorMetrics), bytes; empty when unknown.", null=True),
        ),
        migrations.AddField(
            model_name='metricsnapshot',
            name='memory',
            field=models.JSONField(blank=True, default=dict, help_text="The window's memory signals per executor, stage and state operator (sparkclient.collector.memory.MemorySample.to_json)."),
        ),
    ]
