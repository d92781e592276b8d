"""The collector: Spark's monitoring REST API and the query progress read into one typed sample
per window (``JobSample``), and that sample as the scaling model's inputs."""
