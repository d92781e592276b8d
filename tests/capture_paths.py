"""Where the suite's recorded Spark captures live: inside the repository, under ``tests/fixtures``.

- :data:`SPARK_4_3_0`: raw REST, metrics and progress JSON of PySpark/Spark 4.3.0 (see its README.txt),
  one file read by :func:`spark_json`; :data:`P1_RUN_ID` is its ``rate`` query's run;
- :data:`DEMO_CAPTURES`: the demo pipeline's REST and progress, one JSON document per application;
- :data:`SKEW_CAPTURE`: a skewed query's REST, progress and task summaries (see its README.txt);
- :data:`FOREACHBATCH_CAPTURE`: a stateful query whose ``foreachBatch`` function writes each batch twice
  (REST, SQL, progress and the runner's plan stages; see its README.txt);
- :data:`JOIN_CAPTURE`: a stream-stream join of two rate sources (REST, SQL, progress and the
  runner's plan stages; see its README.txt);
- :data:`BROADCAST_CAPTURE`: a stream joined with a broadcast parquet table (REST, SQL, progress
  and the runner's plan stages; see its README.txt);
- :data:`MEMORY_CAPTURE`: a stateful query whose RocksDB state grows under a 512 MB driver until it
  spends its time in GC (REST, SQL, progress, and ``/executors`` read every 3 s; see its README.txt).
"""

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SPARK_4_3_0 = FIXTURES / "spark-4.3.0"
DEMO_CAPTURES = FIXTURES / "demo-captures"
SKEW_CAPTURE = FIXTURES / "spark-4.3.0-skew" / "skew_app.json"
FOREACHBATCH_CAPTURE = FIXTURES / "spark-4.3.0-foreachbatch" / "foreachbatch_app.json"
JOIN_CAPTURE = FIXTURES / "spark-4.3.0-join" / "join_app.json"
BROADCAST_CAPTURE = FIXTURES / "spark-4.3.0-broadcast" / "broadcast_app.json"
MEMORY_CAPTURE = FIXTURES / "spark-4.3.0-memory" / "memory_app.json"
#: The run id of p1, the steady ``rate`` query of :data:`SPARK_4_3_0`.
P1_RUN_ID = "ae3eaf98-3470-49e6-8203-7305bb7e17be"


@cache
def _parsed(name: str) -> Any:
    return json.loads((SPARK_4_3_0 / name).read_text())


def spark_json(name: str) -> Any:
    """The JSON file ``name`` of :data:`SPARK_4_3_0`, parsed; a copy of its own (a test may edit it)."""
    return copy.deepcopy(_parsed(name))
