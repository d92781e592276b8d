"""The runner: ``python -m sparkclient run``, its supervisor, the driver that runs a pipeline and
serves the control channel, and the restart paths (in process, warm handover, executors in
place, offline state repartition)."""
