"""The scaling model: pure Python, no Django, no HTTP, no Spark; frozen values in and out, deterministic for a
given input (which includes a clock value). FLIP-271 and DS2 mapped to Spark micro-batches; its rooms and the
one door of the decision, ``scaling.planner.decide``: docs/ARCHITECTURE.md, "The scaling model"."""
