"""Everything that talks to Spark: the REST client, the micro-batch topology mapping,
the progress listener, the pipeline runner and the demo pipelines.

Does not import Django (ARCHITECTURE.md: ``webapp -> sparkclient -> scaling``).
"""
