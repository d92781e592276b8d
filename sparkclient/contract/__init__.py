"""The pipeline contract and the runner's protocol, at the bottom of ``sparkclient``: what a user's
pipeline declares (``spec``: ``build(spark, knobs)``, knobs and what each sets), the control protocol
over Redis (``control``; its typed messages in ``messages``), every Redis key (``keys``), the demo
load's rate (``load``) and the stage <-> knob binding (``binding``). Imports nothing else of ``sparkclient``.

A pipeline module imports its declarations from here::

    from sparkclient.contract import Knob, KnobTarget, pipeline, run_context
"""

from sparkclient.contract.spec import Knob, KnobTarget, pipeline, run_context

__all__ = ["Knob", "KnobTarget", "pipeline", "run_context"]
