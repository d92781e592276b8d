"""The cause a dead driver's log names (:func:`sparkclient.runner.driverlog.query_failure`), on a real
capture: a 512 MB driver whose task ran out of heap, then the py4j errors of its Python side."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkclient.runner.driverlog import TAIL_BYTES, Crash, crash_of, query_failure, root_exception, write_crash

CAPTURE = Path(__file__).parent / "data" / "driver-oom.log"
TERMINATED = ("26/12/02 05:54:59 ERROR MicroBatchExecution: Query q [id = 1, runId = 2] terminated with error\n")


def test_the_capture_names_the_jvm_cause_not_the_python_error_after_it():
    assert query_failure(CAPTURE) == "java.lang.OutOfMemoryError: Java heap space"


def test_only_what_was_written_after_since_counts():
    text = CAPTURE.read_bytes()
    assert query_failure(CAPTURE, since=text.index(b"terminated with error") + 1) is None
    assert query_failure(CAPTURE, since=text.index(b"terminated with error") - 200) is not None


@pytest.mark.parametrize(("log", "cause"), [
    # the last Caused by of the trace is the root cause
    (TERMINATED + "org.apache.spark.SparkException: Job aborted\n\tat a.b(C.scala:1)\n"
     "Caused by: java.io.IOException: disk full\n\tat d.e(F.java:2)\n"
     "Caused by: java.lang.OutOfMemoryError: Java heap space\n\t... 3 more\n",
     "java.lang.OutOfMemoryError: Java heap space"),
    # no Caused by: the trace's first exception line
    (TERMINATED + "org.apache.spark.SparkException: Job aborted due to stage failure\n\tat a.b(C.scala:1)\n",
     "org.apache.spark.SparkException: Job aborted due to stage failure"),
    # the trace ends at the next log line: an exception named after it is not the query's
    (TERMINATED + "org.apache.spark.SparkException: boom\n26/12/02 05:55:00 WARN x: y\n"
     "Caused by: java.lang.OutOfMemoryError: later\n", "org.apache.spark.SparkException: boom"),
    # of two failed queries, the last one
    (TERMINATED + "java.lang.IllegalStateException: first\n26/12/02 05:56:00 INFO x\n" + TERMINATED
     + "java.lang.ArithmeticException: second\n", "java.lang.ArithmeticException: second"),
    # no query failed: nothing to name
    ("26/12/02 05:54:59 ERROR Executor: Exception in task 0.0\njava.lang.OutOfMemoryError: Java heap space\n", None),
    (TERMINATED + "26/12/02 05:55:00 INFO next\n", None),
])
def test_the_cause_is_the_last_caused_by_of_the_last_failed_query(tmp_path, log, cause):
    path = tmp_path / "driver.log"
    path.write_text(log)
    assert query_failure(path) == cause


def test_only_the_tail_is_read_and_a_missing_log_names_nothing(tmp_path):
    path = tmp_path / "driver.log"
    path.write_text(TERMINATED + "java.lang.OutOfMemoryError: early\n" + "x\n" * (TAIL_BYTES // 2))
    assert query_failure(path) is None
    path.write_text("x\n" * (TAIL_BYTES // 2 - 100) + TERMINATED + "java.lang.OutOfMemoryError: late\n")
    assert query_failure(path) == "java.lang.OutOfMemoryError: late"
    assert query_failure(tmp_path / "absent.log") is None


def test_a_long_cause_is_cut_to_300_characters(tmp_path):
    path = tmp_path / "driver.log"
    path.write_text(TERMINATED + "java.lang.RuntimeException: " + "x" * 1000 + "\n")
    assert len(query_failure(path)) == 300


class _Captured(Exception):
    """Stands for PySpark's ``StreamingQueryException``: the JVM's text, the Python traceback inside it."""


FOREACH_BATCH = _Captured(
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink.\n"
    "Caused by: py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: "
    "Traceback (most recent call last):\n  File \"pipe.py\", line 9, in call\n    raise ValueError('x')\n"
    "ValueError: the pipeline raises after 15 s of life\n")


@pytest.mark.parametrize(("exc", "exception", "message"), [
    (FOREACH_BATCH, "ValueError", "the pipeline raises after 15 s of life"),
    (_Captured("Job aborted\nCaused by: java.io.IOException: x\nCaused by: java.lang.ArithmeticException: / by zero"),
     "java.lang.ArithmeticException", "/ by zero"),
    (KeyError("k"), "KeyError", "'k'"),
])
def test_a_crash_is_named_by_its_root_exception(exc, exception, message):
    assert root_exception(exc) == Crash(exception, message)


def test_the_record_wins_unless_it_names_a_python_side_that_lost_its_jvm(tmp_path):
    log = tmp_path / "driver.log"
    log.write_text(TERMINATED + "java.lang.OutOfMemoryError: Java heap space\n")
    write_crash(tmp_path, FOREACH_BATCH)
    assert crash_of(tmp_path, log) == Crash("ValueError", "the pipeline raises after 15 s of life")
    assert crash_of(tmp_path, log) == Crash("java.lang.OutOfMemoryError", "Java heap space")  # the record was read
    write_crash(tmp_path, ConnectionRefusedError(111, "Connection refused"))
    assert crash_of(tmp_path, log) == Crash("java.lang.OutOfMemoryError", "Java heap space")
    write_crash(tmp_path, ConnectionRefusedError(111, "Connection refused"))
    assert crash_of(tmp_path, tmp_path / "absent.log").exception == "ConnectionRefusedError"
    assert crash_of(tmp_path, tmp_path / "absent.log") is None
