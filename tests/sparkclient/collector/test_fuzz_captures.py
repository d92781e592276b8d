"""Every Spark parser fuzzed from EVERY capture in ``tests/fixtures``, with the invariants of its output.

Seeds are found by shape in every JSON file under ``tests/fixtures`` (progress objects, SQL metric
strings, ``/executors`` lists, task summaries, ``/jobs`` / ``/stages`` / SQL payloads, and the
capture sets a sample is built from). Each parser gets ``FUZZ_EXAMPLES`` (10,000) mutated inputs,
drawn across all its seeds, with the mutations of :mod:`tests.sparkclient.collector.test_fuzz_parsers`.
A parser must raise only its typed error, and every output it accepts must hold its invariants:
non-negative counts, durations and sizes, ordered statistics (``min ≤ med ≤ max``), cores within
:data:`sparkclient.collector.sparkjson.MAX_CORES`, and a scenario the scaler's evaluator accepts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st

from scaling.scenario.format import evaluate_text
from sparkclient.collector import metricstrings
from sparkclient.collector.batchwindow import batch_end_s, progress_time_s
from sparkclient.collector.progress import parse_progress, ran_a_batch
from sparkclient.collector.rest import SparkRestClient, SparkRestError
from sparkclient.collector.sample import JobSample, SampleError
from sparkclient.collector.snapshot import (
    RatesUnavailableError,
    ScenarioRefusedError,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
)
from sparkclient.collector.sparkjson import MAX_CORES, SparkDataError
from sparkclient.collector.stages import batch_jobs, executors_and_cores, slowest_task_run_ms
from tests.capture_paths import FIXTURES, SPARK_4_3_0
from tests.sparkclient.collector.test_fuzz_parsers import (
    _assert_finite_sample,
    _fuzz,
    captures_of,
    mutated,
    truncated_text,
)

pytestmark = pytest.mark.fuzz

Json = dict[str, Any]


#: Fixture folders that hold no Spark output: the scaler's own plan documents (``plans``) and the web
#: app's stored plans of the old shape (``webapp-plans-v1``).
NOT_SPARK = {"plans", "webapp-plans-v1"}


def _documents() -> list[tuple[Path, Any]]:
    """Every JSON capture; two ``.json`` files hold the text Spark answers for a DStreams endpoint
    of a Structured Streaming app ("no streaming listener attached"), which no parser reads."""
    out = []
    for path in sorted(FIXTURES.rglob("*.json")):
        if path.relative_to(FIXTURES).parts[0] in NOT_SPARK:
            continue
        text = path.read_text()
        if not text.startswith("no streaming listener"):
            out.append((path, json.loads(text)))
    return out


DOCUMENTS = _documents()


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for inner in value.values():
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


SEEDED: set[str] = set()  # the captures (file names) some seed was found in


def _found(test: Any, wrap: bool = False) -> list[Any]:
    """Every value of every capture for which ``test`` holds (``[value]`` with ``wrap``),
    deduplicated by its JSON text."""
    seen: dict[str, Any] = {}
    for path, document in DOCUMENTS:
        for value in _walk(document):
            if test(value):
                SEEDED.add(path.name)
                seen.setdefault(json.dumps(value, sort_keys=True), [value] if wrap else value)
    return list(seen.values())


def _has(*keys: str) -> Any:
    return lambda value: isinstance(value, dict) and all(key in value for key in keys)


PROGRESSES = _found(_has("batchId", "timestamp", "durationMs"))
EXECUTOR_LISTS = _found(lambda v: isinstance(v, list) and bool(v) and all(_has("totalCores")(e) for e in v))
TASK_SUMMARIES = _found(_has("quantiles", "executorRunTime"))
METRIC_STRINGS = sorted({str(m.get("value")) for node in _found(_has("nodeId", "metrics")) for m in node["metrics"]})
JOB_LISTS = _found(lambda v: isinstance(v, list) and bool(v) and all(_has("jobId", "stageIds")(e) for e in v))
JOB_LISTS += _found(_has("jobId", "stageIds"), wrap=True)[:20]  # single jobs (``/jobs/<id>``) too
STAGE_LISTS = _found(lambda v: isinstance(v, list) and bool(v) and all(_has("stageId", "attemptId")(e) for e in v))
STAGE_LISTS += _found(_has("stageId", "attemptId", "status"), wrap=True)[:20]  # ``/stages/<id>/<attempt>``
SQL_EXECUTIONS = _found(_has("nodes", "edges", "planDescription"))


def test_the_seeds_cover_every_capture() -> None:
    """Each JSON capture gives at least one seed (a fuzz over a subset would pass unnoticed)."""
    unseeded = {path.name for path, _ in DOCUMENTS} - SEEDED
    assert unseeded == NOT_PARSED, unseeded
    assert len(PROGRESSES) >= 30 and len(METRIC_STRINGS) >= 30 and len(EXECUTOR_LISTS) >= 5


#: Captures no parser of the collector reads (the application list, its status and the
#: standalone master's JSON are read by the runner's supervisor and the demo tooling only).
NOT_PARSED = {"p1_applications.json", "p1_app.json", "r1_app.json", "p1_status.json", "p1_metrics_json.json",
              "sa_noda_master_json.json", "sa_da_master_json.json", "sa_b_master_json.json",
              "p1_app_stages_29_0_taskList.json"}


def _one_of(seeds: list[Any]) -> st.SearchStrategy:
    return st.one_of([mutated(seed) for seed in seeds])


# -- progress ----------------------------------------------------------------------------------


def _finite_at_least(value: Any, minimum: float) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= minimum


def test_fuzz_progress_from_every_capture() -> None:
    def check(text: str) -> None:
        progress = parse_progress(text, "ss:progress:fuzz entry 1-0")
        durations = progress.get("durationMs") or {}
        # null reads as absent (sparkjson's rule for every field); anything present is a duration
        assert all(value is None or _finite_at_least(value, 0) for value in durations.values()), durations
        for row in (progress, *(progress.get("sources") or ())):
            assert row.get("numInputRows") is None or _finite_at_least(row["numInputRows"], 0), row
        for op in progress.get("stateOperators") or ():
            assert all(_finite_at_least(v, 0) for k, v in op.items() if k.startswith("num") and v is not None), op
        sink = progress.get("sink") or {}
        assert sink.get("numOutputRows") is None or _finite_at_least(sink["numOutputRows"], -1), sink
        assert isinstance(ran_a_batch(progress), bool)
        assert batch_end_s(progress) >= progress_time_s(progress) >= 0

    strategy = st.one_of(_one_of(PROGRESSES).map(json.dumps), st.sampled_from(PROGRESSES).flatmap(truncated_text))
    _fuzz("progress.parse_progress + ran_a_batch + batch_end_s (every capture)", strategy, check,
          (SparkDataError,))


# -- SQL metric strings ------------------------------------------------------------------------


@st.composite
def _metric_text(draw: st.DrawFn) -> str:
    base = draw(st.sampled_from(METRIC_STRINGS))
    how = draw(st.sampled_from(["cut", "repeat", "insert", "replace", "swap", "sign"]))
    if how == "cut":
        return base[: draw(st.integers(0, len(base)))]
    if how == "repeat":
        return base * draw(st.integers(2, 5))
    if how == "swap":  # two numbers of a statistics string exchanged: min > med or med > max
        numbers = [piece for piece in base.replace("(", ",").split(",") if piece.strip()[:1].isdigit()]
        if len(numbers) >= 2:
            a, b = draw(st.permutations(numbers))[:2]
            return base.replace(a, "\0").replace(b, a).replace("\0", b)
        return base
    position = draw(st.integers(0, len(base)))
    piece = draw(st.text(alphabet="0123456789,.() :-eEinfNa\n\tKiBMsmh", max_size=12))
    if how == "sign":
        piece = "-"
    if how in ("insert", "sign"):
        return base[:position] + piece + base[position:]
    return base[:position] + piece + base[position + len(piece):]


def _assert_stats(stats: metricstrings.MetricStats) -> None:
    values = [stats.total, stats.min, stats.med, stats.max]
    assert all(v is None or (isinstance(v, int) and 0 <= v <= 2**63) for v in values), stats
    if stats.min is not None:
        assert stats.min <= stats.med <= stats.max, stats
    assert stats.stage is None or min(stats.stage) >= 0
    assert stats.task is None or stats.task >= 0


def test_fuzz_metric_strings_from_every_capture() -> None:
    def check(text: str) -> None:
        for parse_one in (metricstrings.parse_count, metricstrings.parse_bytes):
            try:
                value = parse_one(text)
            except metricstrings.MetricStringError:
                continue
            assert isinstance(value, int) and 0 <= value <= 2**63, (parse_one.__name__, value)
        for parse_stats in (metricstrings.parse_duration_ms, metricstrings.parse_size_stats):
            try:
                _assert_stats(parse_stats(text))
            except metricstrings.MetricStringError:
                continue
        assert all(stage >= 0 and attempt >= 0 for stage, attempt in metricstrings.stage_refs(text))

    _fuzz("metricstrings (5 parsers, every capture)", _metric_text(), check, ())


# -- executors and task summaries --------------------------------------------------------------


def test_fuzz_executors_from_every_capture() -> None:
    def check(executors: Any) -> None:
        count, cores = executors_and_cores(executors)
        assert 0 <= count <= MAX_CORES and 0 <= cores <= MAX_CORES, (count, cores)
        assert count or not cores

    _fuzz("stages.executors_and_cores (every capture)", _one_of(EXECUTOR_LISTS), check, (SparkDataError,))


def test_fuzz_task_summaries_from_every_capture() -> None:
    def check(summary: Any) -> None:
        slowest = slowest_task_run_ms(summary)
        assert _finite_at_least(slowest, 0)
        others = [v for v in summary["executorRunTime"] if _finite_at_least(v, 0)]
        assert slowest >= max(others), (slowest, others)  # the value at quantile 1.0 is the maximum

    seeds = [*TASK_SUMMARIES, *({**s, "quantiles": [*s["quantiles"], 1.0],
                                 "executorRunTime": [*s["executorRunTime"], max(s["executorRunTime"])]}
                                for s in TASK_SUMMARIES if 1.0 not in s["quantiles"])]
    _fuzz("stages.slowest_task_run_ms (every capture)", _one_of(seeds), check, (SparkDataError,))


# -- REST payloads -----------------------------------------------------------------------------


def test_fuzz_rest_payloads_from_every_capture() -> None:
    bodies = [("jobs", jobs[:2]) for jobs in JOB_LISTS] + [("stages", stages[:2]) for stages in STAGE_LISTS]
    bodies += [("executors", executors[:2]) for executors in EXECUTOR_LISTS]
    bodies += [("sql", {**e, "nodes": e["nodes"][:3], "edges": e["edges"][:3]}) for e in SQL_EXECUTIONS]
    current: dict[str, str] = {}
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, content=current["body"].encode("utf-8", "surrogatepass"), headers={"content-type": "application/json"}))
    client = SparkRestClient("http://spark.invalid:4040", attempts=1, transport=transport)
    calls = {"jobs": lambda: client.jobs("app"), "stages": lambda: client.stages("app"),
             "executors": lambda: client.executors("app"), "sql": lambda: client.sql_execution("app", 1)}

    def check(args: tuple[str, str]) -> None:
        endpoint, body = args
        current["body"] = body
        payload = calls[endpoint]()
        assert isinstance(payload, dict if endpoint == "sql" else list)

    strategy = st.one_of([mutated(body).map(json.dumps).map(lambda text, e=endpoint: (e, text))
                          for endpoint, body in bodies])
    try:
        _fuzz("rest payload checks (every capture)", strategy, check, (SparkRestError,))
    finally:
        client.close()


# -- captures -> sample -> scenario ------------------------------------------------------------


def _capture_sets() -> Iterator[Json]:
    """Every capture a sample is built from, as ``jobs``, ``stages``, ``executors``, ``progresses``, ``sql``."""
    for folder in (SPARK_4_3_0, FIXTURES / "spark-4.3.0-restart"):
        c = load_captures(folder)
        yield {"jobs": c.jobs, "stages": c.stages, "executors": c.executors, "progresses": c.progresses, "sql": c.sql}
    for path, document in DOCUMENTS:
        if isinstance(document, dict) and {"jobs", "stages", "progresses", "run_id"} <= set(document):
            yield document


def _newest_batches(capture: Json, batches: int = 2) -> Json:
    """``capture`` cut to its newest run's last ``batches`` batches (and the progress before them)."""
    run_id = max(capture["progresses"], key=progress_time_s)["runId"]
    by_batch = batch_jobs(capture["jobs"], run_id)
    keep = sorted(by_batch)[-batches:]
    jobs = [job for batch in keep for job in by_batch[batch]]
    stage_ids = {sid for job in jobs for sid in job["stageIds"]}
    job_ids = {job["jobId"] for job in jobs}
    return {"jobs": jobs, "stages": [s for s in capture["stages"] if s["stageId"] in stage_ids],
            "executors": capture.get("executors") or [], "sql": [
                e for e in capture.get("sql") or () if set(e.get("successJobIds") or ()) & job_ids],
            "progress": [p for p in capture["progresses"] if p.get("runId") != run_id or p["batchId"] >= keep[0] - 1]}


CAPTURE_SETS = [_newest_batches(capture) for capture in _capture_sets()]


def _assert_sample(sample: JobSample) -> None:
    """What a sample may say: finite numbers >= 0, cores and executors a cluster can have, batch
    ids in order, a span when a batch was counted, edges between its own earlier vertices."""
    _assert_finite_sample(sample)
    assert sample.cores <= MAX_CORES and sample.executors <= MAX_CORES, (sample.executors, sample.cores)
    if sample.first_batch_id is not None:
        assert sample.first_batch_id <= sample.last_batch_id
        assert sample.batches <= sample.last_batch_id - sample.first_batch_id + 1
    assert sample.window_s > 0 or not sample.batches
    ids = [v.vertex_id for v in sample.vertices]
    assert len(set(ids)) == len(ids)
    assert all(u in ids[:ids.index(v.vertex_id)] for v in sample.vertices for u in v.upstream)


def _assert_scenario(doc: Json) -> None:
    cluster = doc["cluster"]
    assert 1 <= cluster["executors"] * cluster["cores_per_executor"] <= MAX_CORES, cluster
    evaluate_text(json.dumps(doc, allow_nan=False))  # raises ScenarioError: the test fails


def test_fuzz_captures_to_sample_to_scenario() -> None:
    assert len(CAPTURE_SETS) >= 8

    def check(capture: Any) -> None:
        if not isinstance(capture, dict):
            return
        try:
            sample = sample_from_captures(captures_of(capture))
        except (SparkDataError, SampleError):
            raise
        except ValueError as exc:  # the newest run has no progress left: refused with the reason
            assert "no progress of run" in str(exc)
            return
        _assert_sample(sample)
        try:
            doc = sample_to_scenario(sample)
        except (RatesUnavailableError, ScenarioRefusedError):
            return
        except ValueError as exc:  # no vertex / no span: refused with the reason
            assert "sample" in str(exc)
            return
        _assert_scenario(doc)

    _fuzz("snapshot: captures -> sample -> scenario -> evaluate (every capture)", _one_of(CAPTURE_SETS), check,
          (SparkDataError, SampleError))
