"""Where the suite's recorded Spark captures live: inside the repository, under ``tests/fixtures``.

- :data:`SPARK_4_3_0`: raw REST, metrics and progress JSON of PySpark/Spark 4.3.0 (see its README.txt);
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

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SPARK_4_3_0 = FIXTURES / "spark-4.3.0"
DEMO_CAPTURES = FIXTURES / "demo-captures"
SKEW_CAPTURE = FIXTURES / "spark-4.3.0-skew" / "skew_app.json"
FOREACHBATCH_CAPTURE = FIXTURES / "spark-4.3.0-foreachbatch" / "foreachbatch_app.json"
JOIN_CAPTURE = FIXTURES / "spark-4.3.0-join" / "join_app.json"
BROADCAST_CAPTURE = FIXTURES / "spark-4.3.0-broadcast" / "broadcast_app.json"
MEMORY_CAPTURE = FIXTURES / "spark-4.3.0-memory" / "memory_app.json"
