"""The scaling model: pure Python, no Django, no HTTP, no Spark (docs/ARCHITECTURE.md, "The scaling model").

Frozen values in, frozen values out; deterministic for a given input, which includes a clock value.
It follows FLIP-271 (the Flink Kubernetes operator autoscaler) and the DS2 paper (Kalavri et al.,
"Three steps is all you need", OSDI 2018), mapped to Spark micro-batches. Its rooms, bottom to top:
``policy``, ``values``, ``planner``, ``words`` and ``forecast``, ``scenario``, ``sim``, ``bench``.
The decision has one door, ``scaling.planner.decide``.
"""
