"""Demo tooling: the Nexmark generator and its Redis log source, the example pipelines, a local
standalone cluster, the rescale benchmark, and ``python -m sparkclient.demo`` (``make demo``)."""
