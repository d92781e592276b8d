"""Bad data from Spark: property-based tests over the REAL Spark 4.3.0 captures.

Each parser gets 10,000 inputs made by mutating a real capture: dropped keys, wrong types, nulls,
negative, huge, NaN and infinite numbers, and (for text inputs) truncated JSON. A parser must return
a valid value (every number of a sample finite and >= 0) or raise its typed error naming the field;
any other exception is a crash. Each test prints "fuzz <parser>: N inputs tried, M crashes".

Per-example work is kept small (the last four batches of the p1 capture and their SQL execution)
so the whole file runs in the default suite on a 2-core CI.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from scaling.scenario.format import parse
from scaling.scenario.values import ScenarioError
from sparkclient.collector import metricstrings
from sparkclient.collector.batchwindow import batch_end_s, window_batches
from sparkclient.collector.progress import parse_progress
from sparkclient.collector.rest import SparkRestClient, SparkRestError
from sparkclient.collector.sample import JobSample, SampleError
from sparkclient.collector.snapshot import Captures, RatesUnavailableError, sample_from_captures, sample_to_scenario
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import batch_jobs, slowest_task_run_ms
from sparkclient.collector.topology import sample_from_rest
from tests.capture_paths import (
    BROADCAST_CAPTURE,
    FOREACHBATCH_CAPTURE,
    JOIN_CAPTURE,
    P1_RUN_ID,
    SKEW_CAPTURE,
    spark_json,
)

pytestmark = pytest.mark.fuzz  # in the default run (`make test`, .ci/run); `-m "not fuzz"` skips them

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10000"))
#: Inputs per hypothesis example: the engine's own work per example (its choice tree, the saved
#: random state) cost as much as drawing an input; ten inputs per example halve the cost per input.
BATCH = 10
KEEP_BATCHES = (11, 12, 13, 14)


def _small_capture() -> dict[str, Any]:
    """The last four batches of p1 with everything a sample reads about them."""
    jobs_all, stages_all = spark_json("p1_app_jobs.json"), spark_json("p1_app_stages.json")
    by_batch = batch_jobs(jobs_all, P1_RUN_ID)
    jobs = [job for batch in KEEP_BATCHES for job in by_batch[batch]]
    stage_ids = {sid for job in jobs for sid in job["stageIds"]}
    job_ids = {job["jobId"] for job in jobs}
    sql = [e for e in spark_json("p1_app_sql__details-true.json") if set(e.get("successJobIds") or ()) & job_ids][-1:]
    progresses = [p for p in spark_json("p1_recentProgress.json") if p["batchId"] in (10, *KEEP_BATCHES)]
    return {"jobs": jobs, "stages": [s for s in stages_all if s["stageId"] in stage_ids],
            "executors": spark_json("p1_app_executors.json"), "progress": progresses, "sql": sql}


CAPTURE = _small_capture()
WINDOW_END_S = batch_end_s(CAPTURE["progress"][-1]) + 0.001


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            out += _paths(inner, (*prefix, index))
    return out


MUTATIONS = ("drop", "null", "string", "list", "dict", "bool", "negative", "huge", "nan", "inf", "-inf",
             "fraction", "zero", "empty-string", "nested-deep", "scale")
_HUGE = (10**30, 1e308, 2**63, -(2**63) - 1, 10**400)


def _replacement(kind: str, old: Any, draw_index: int) -> Any:
    if kind == "null":
        return None
    if kind == "string":
        return "x" if not isinstance(old, (int, float)) or isinstance(old, bool) else f"{old}x"
    if kind == "list":
        return [old]
    if kind == "dict":
        return {"v": old}
    if kind == "bool":
        return True
    if kind == "negative":
        return -abs(old) - 1 if isinstance(old, (int, float)) and not isinstance(old, bool) else -1
    if kind == "huge":
        return _HUGE[draw_index % len(_HUGE)]
    if kind == "nan":
        return math.nan
    if kind == "inf":
        return math.inf
    if kind == "-inf":
        return -math.inf
    if kind == "fraction":
        return 0.5
    if kind == "zero":
        return 0
    if kind == "empty-string":
        return ""
    if kind == "scale":  # plausible-looking but impossible: within 2^53, beyond any cluster or source
        number = isinstance(old, (int, float)) and not isinstance(old, bool)
        return old * 10 ** (1 + draw_index % 9) if number else old
    return {"a": [{"b": [[[old]]]}]}


def _apply(doc: Any, path: tuple, kind: str, draw_index: int, owned: set[int]) -> None:
    """Mutate ``doc`` at ``path``. The lists and dicts on the way down that are not in ``owned`` (the
    ids of the containers this input made) are shared with the seed: each is copied (shallow) and
    the copy put in its place first, so the seed never changes."""
    parent = doc
    for key in path[:-1]:
        try:
            child = parent[key]
        except (KeyError, IndexError, TypeError):
            return
        if isinstance(child, (dict, list)) and id(child) not in owned:
            child = child.copy()
            parent[key] = child
            owned.add(id(child))
        parent = child
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        if kind == "drop":
            del parent[last]
        else:
            parent[last] = _replacement(kind, parent[last], draw_index)
    elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if kind == "drop":
            del parent[last]
        else:
            parent[last] = _replacement(kind, parent[last], draw_index)


#: Every seed a ``mutated`` strategy shares its inputs' untouched parts with, by its JSON text:
#: ``_fuzz`` checks after each run that no parser changed one in place.
_SEEDS: dict[str, Any] = {}


def mutated(original: Any) -> st.SearchStrategy:
    """1 to 4 mutations of ``original``, each at a random path of it. An input is ``original`` as
    JSON reads it back (lists for tuples, string keys) with only the containers on the mutated
    paths copied: the value a fresh ``json.loads`` per input gave, without its cost (a third of
    the time per input on the 100 kB captures)."""
    paths = _paths(original)
    step = st.tuples(st.sampled_from(paths), st.sampled_from(MUTATIONS), st.integers(0, 100))
    text = json.dumps(original)
    if text not in _SEEDS:
        _SEEDS[text] = json.loads(text)
    seed = _SEEDS[text]

    def build(steps: list) -> Any:
        doc = seed.copy()
        owned = {id(doc)}
        for path, kind, index in steps:
            _apply(doc, path, kind, index, owned)
        return doc

    return st.lists(step, min_size=1, max_size=4).map(build)


def truncated_text(original: Any) -> st.SearchStrategy:
    """The JSON text of ``original`` (possibly mutated first), cut at a random point or with junk."""
    def cut(args: tuple) -> str:
        doc, fraction, junk = args
        text = json.dumps(doc)
        return text[: int(len(text) * fraction)] + junk

    deep = "[" * 100_000  # nested beyond the decoder's recursion limit
    return st.one_of(
        st.tuples(st.one_of(st.just(original), mutated(original)), st.floats(0.0, 1.0),
                  st.sampled_from(["", "}", "]]", "\x00", "\ud800", "NaN", "{{{{"])).map(cut),
        st.just(deep),
    )


def _assert_finite_sample(sample: JobSample) -> None:
    for row in (sample, *sample.vertices):
        for name, value in vars(row).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert math.isfinite(value) and value >= 0, (name, value)


def _fuzz(name: str, strategy: st.SearchStrategy, check: Callable[[Any], None],
          allowed: tuple[type[BaseException], ...]) -> None:
    """Run ``check`` on EXAMPLES inputs (``BATCH`` per hypothesis example); an exception outside
    ``allowed`` (or a failed assertion) is a crash."""
    tried = 0
    crashes: list[str] = []

    @settings(max_examples=math.ceil(EXAMPLES / BATCH), deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.lists(strategy, min_size=BATCH, max_size=BATCH))
    def run(values: list[Any]) -> None:
        nonlocal tried
        for value in values:
            tried += 1
            try:
                check(value)
            except allowed as exc:
                if isinstance(exc, SparkDataError):
                    assert exc.field, "a SparkDataError must name the field"
            except Exception as exc:  # noqa: BLE001 - counting crashes is the point
                frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/sparkclient/" in f.filename]
                where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "test"
                crashes.append(f"{type(exc).__name__} at {where}: {str(exc)[:100]}")

    run()
    print(f"\nfuzz {name}: {tried} inputs tried, {len(crashes)} crashes")
    changed = [text[:200] for text, seed in _SEEDS.items() if json.dumps(seed) != text]
    assert not changed, f"a parser changed its input in place (inputs share the seed's parts): {changed[:3]}"
    assert tried >= EXAMPLES
    sites = Counter(crash.split(":", 2)[0] + ":" + crash.split(":", 2)[1] for crash in crashes)
    assert not crashes, (sites.most_common(20), crashes[:5])


# -- the parsers ------------------------------------------------------------------------------


def test_fuzz_topology_sample_from_rest() -> None:
    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        sample = sample_from_rest(
            capture.get("jobs"), capture.get("stages"), capture.get("progress"), capture.get("executors"),
            run_id=P1_RUN_ID, trigger_interval_s=2.0, window_start_s=WINDOW_END_S - 7.0, window_end_s=WINDOW_END_S,
            sql=capture.get("sql"), collected_at=WINDOW_END_S + 1.0,
        )
        _assert_finite_sample(sample)

    _fuzz("topology.sample_from_rest", mutated(CAPTURE), check, (SparkDataError, SampleError))


def test_fuzz_progress_parse_and_window() -> None:
    progresses = CAPTURE["progress"]

    def check(text: str) -> None:
        progress = parse_progress(text, "ss:progress:fuzz entry 1-0")
        window = window_batches([*progresses[:-1], progress], run_id=P1_RUN_ID, window_start_s=None,
                                window_end_s=WINDOW_END_S + 100.0)
        assert all(end >= start and math.isfinite(end) for start, end in window.spans.values())
        assert math.isfinite(window.span_s) and window.span_s >= 0

    _fuzz("progress.parse_progress + batchwindow.window_batches", truncated_text(progresses[-1]), check,
          (SparkDataError,))


_METRIC_STRINGS = sorted({
    str(metric.get("value"))
    for execution in CAPTURE["sql"]
    for node in execution.get("nodes") or ()
    for metric in node.get("metrics") or ()
})


@st.composite
def metric_text(draw: st.DrawFn) -> str:
    base = draw(st.sampled_from(_METRIC_STRINGS))
    how = draw(st.sampled_from(["cut", "repeat", "insert", "replace", "spaces", "raw"]))
    if how == "cut":
        return base[: draw(st.integers(0, len(base)))]
    if how == "repeat":
        return base * draw(st.integers(2, 50)) + draw(st.sampled_from(["", ",", "(", " x"]))
    if how == "spaces":  # the shape that took 257 s: an open parenthesis and a long run of spaces
        return draw(st.sampled_from(["(", "1 (", "total ("])) + " " * draw(st.integers(100, 25_000)) + ","
    position = draw(st.integers(0, len(base)))
    piece = draw(st.text(alphabet="0123456789,.() :-eEinfNa\n\tKiBMsmh", max_size=30))
    if how == "insert":
        return base[:position] + piece + base[position:]
    if how == "replace":
        return base[:position] + piece + base[position + len(piece):]
    return draw(st.text(max_size=200))


def test_fuzz_metricstrings() -> None:
    parsers = (metricstrings.parse_count, metricstrings.parse_bytes, metricstrings.parse_duration_ms,
               metricstrings.parse_size_stats, metricstrings.stage_refs)

    def check(text: str) -> None:
        for parse_one in parsers:
            try:
                result = parse_one(text)
            except ValueError:
                continue
            if isinstance(result, metricstrings.MetricStats):
                for value in (result.total, result.min, result.med, result.max):
                    assert value is None or abs(value) <= 2**63

    _fuzz("metricstrings (5 parsers)", metric_text(), check, ())


def captures_of(capture: dict) -> Captures:
    """A mutated one-document capture (``jobs``, ``stages``, ``executors``, ``progress``, ``sql``) as the
    snapshot CLI's ``Captures``."""
    return Captures(jobs=capture.get("jobs"), stages=capture.get("stages"), executors=capture.get("executors"),
                    progresses=capture.get("progress"), sql=capture.get("sql"), app_id="app", files=())


def test_fuzz_snapshot_captures_to_scenario() -> None:
    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        try:
            sample = sample_from_captures(captures_of(capture))
        except (SparkDataError, SampleError):
            return
        _assert_finite_sample(sample)
        try:
            doc = sample_to_scenario(sample)
        except RatesUnavailableError:
            return
        except ValueError as exc:  # no vertex / no span: refused with the reason
            assert "sample" in str(exc)
            return
        text = json.dumps(doc, allow_nan=False)  # raises on a non-finite number
        try:
            parse(text)
        except ScenarioError as exc:
            raise AssertionError(f"the snapshot made a scenario the scaler refuses: {exc}") from exc

    _fuzz("snapshot.sample_from_captures -> sample_to_scenario -> scaling parse", mutated(CAPTURE), check,
          (SparkDataError, SampleError))


def test_fuzz_rest_payload_checks() -> None:
    # two entries per list keep the per-example work small; the checks do not depend on the length
    bodies = {"jobs": CAPTURE["jobs"][:2], "stages": CAPTURE["stages"][:2], "executors": CAPTURE["executors"],
              "1": {key: value for key, value in CAPTURE["sql"][0].items() if key != "nodes"}
              | {"nodes": CAPTURE["sql"][0]["nodes"][:3]}}
    current: dict[str, str] = {}
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, content=current["body"].encode("utf-8", "surrogatepass"), headers={"content-type": "application/json"}))
    client = SparkRestClient("http://spark.invalid:4040", attempts=1, transport=transport)
    calls = {"jobs": lambda: client.jobs("app"), "stages": lambda: client.stages("app"),
             "executors": lambda: client.executors("app"), "1": lambda: client.sql_execution("app", 1)}

    texts = {endpoint: st.one_of(truncated_text(body), mutated(body).map(json.dumps))
             for endpoint, body in bodies.items()}

    @st.composite
    def responses(draw: st.DrawFn) -> tuple[str, str]:
        endpoint = draw(st.sampled_from(sorted(bodies)))
        return endpoint, draw(texts[endpoint])

    def check(args: tuple[str, str]) -> None:
        endpoint, body = args
        current["body"] = body
        payload = calls[endpoint]()
        assert isinstance(payload, list if endpoint != "1" else dict)

    try:
        _fuzz("rest payload checks", responses(), check, (SparkRestError,))
    finally:
        client.close()


@pytest.mark.parametrize("text", ["(" + " " * 25_000 + ",", "1 (" + " " * 25_000 + ",", "1" * 25_000 + "x"])
def test_the_257_s_metric_string_is_refused_at_once(text: str) -> None:
    """The measured quadratic case: a 25,000-character string. Refused by length, so no regex runs."""
    for parse_one in (metricstrings.parse_bytes, metricstrings.parse_duration_ms, metricstrings.parse_size_stats):
        with pytest.raises(ValueError, match="characters"):
            parse_one(text)


def _last_batches(capture: dict[str, Any], batches: int) -> dict[str, Any]:
    """``capture`` (a one-document capture: jobs, stages, executors, progresses, run_id) cut to its
    last ``batches`` batches, with the progress of the batch before them."""
    by_batch = batch_jobs(capture["jobs"], capture["run_id"])
    keep = sorted(by_batch)[-batches:]
    jobs = [job for batch in keep for job in by_batch[batch]]
    stage_ids = {sid for job in jobs for sid in job["stageIds"]}
    return {"jobs": jobs, "stages": [s for s in capture["stages"] if s["stageId"] in stage_ids],
            "executors": capture["executors"], "run_id": capture["run_id"],
            "progress": [p for p in capture["progresses"] if p["batchId"] >= keep[0] - 1]}


def _small_skew_capture() -> dict[str, Any]:
    """The skew capture's last four batches, with the task summaries of their stages."""
    capture = json.loads(SKEW_CAPTURE.read_text())
    small = _last_batches(capture, 4)
    stage_ids = {s["stageId"] for s in small["stages"]}
    return {**small, "summaries": {k: v for k, v in capture["task_summaries"].items()
                                   if int(k.split("/")[0]) in stage_ids}}


SKEW = _small_skew_capture()
SKEW_END_S = batch_end_s(SKEW["progress"][-1]) + 0.001


def test_fuzz_task_summaries_and_the_busiest_task() -> None:
    """``taskSummary`` payloads (``stages.slowest_task_run_ms``) and the stages they belong to, mutated
    together: the sample keeps every number finite and >= 0, or the error names the field."""

    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        summaries = capture.get("summaries")

        def slowest(stage_id: int, attempt: int) -> float | None:
            if not isinstance(summaries, dict) or f"{stage_id}/{attempt}" not in summaries:
                return None
            return slowest_task_run_ms(summaries[f"{stage_id}/{attempt}"])

        sample = sample_from_rest(
            capture.get("jobs"), capture.get("stages"), capture.get("progress"), capture.get("executors"),
            run_id=SKEW["run_id"], trigger_interval_s=2.0, window_start_s=SKEW_END_S - 7.0, window_end_s=SKEW_END_S,
            collected_at=SKEW_END_S + 1.0, slowest_task_ms=slowest,
        )
        _assert_finite_sample(sample)

    _fuzz("stages.slowest_task_run_ms + topology.sample_from_rest", mutated(SKEW), check,
          (SparkDataError, SampleError))


def _small_foreachbatch_capture() -> dict[str, Any]:
    """The foreachBatch capture's last three batches (two jobs each, the second re-reading the first)."""
    return _last_batches(json.loads(FOREACHBATCH_CAPTURE.read_text()), 3)


FOREACHBATCH = _small_foreachbatch_capture()
FOREACHBATCH_END_S = batch_end_s(FOREACHBATCH["progress"][-1]) + 0.001


def test_fuzz_foreachbatch_rereads() -> None:
    """``stages.fold_rereads`` (a stage of a later job re-reading an earlier one's output, folded into
    it) on the mutated foreachBatch capture: ``rddIds``, ``stageIds``, task counts and busy times
    broken in every way give a finite sample or an error naming the field."""

    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        sample = sample_from_rest(
            capture.get("jobs"), capture.get("stages"), capture.get("progress"), capture.get("executors"),
            run_id=FOREACHBATCH["run_id"], trigger_interval_s=3.0, window_start_s=FOREACHBATCH_END_S - 10.0,
            window_end_s=FOREACHBATCH_END_S, collected_at=FOREACHBATCH_END_S + 1.0,
        )
        _assert_finite_sample(sample)

    unmutated = sample_from_rest(FOREACHBATCH["jobs"], FOREACHBATCH["stages"], FOREACHBATCH["progress"],
                                 FOREACHBATCH["executors"], run_id=FOREACHBATCH["run_id"], trigger_interval_s=3.0,
                                 window_start_s=FOREACHBATCH_END_S - 10.0, window_end_s=FOREACHBATCH_END_S)
    assert len(unmutated.vertices) == 2  # the fold runs on the unmutated capture (3 stages ran per batch)
    _fuzz("stages.fold_rereads + topology.sample_from_rest", mutated(FOREACHBATCH), check,
          (SparkDataError, SampleError))


def _small_capture_with_sql(path: Path) -> dict[str, Any]:
    """A one-document capture's last three batches, with the SQL executions that ran their jobs."""
    capture = json.loads(path.read_text())
    small = _last_batches(capture, 3)
    job_ids = {job["jobId"] for job in small["jobs"]}
    return {**small, "sql": [e for e in capture["sql"] if set(e.get("successJobIds") or ()) & job_ids]}


def _sample_with_sql(capture: dict[str, Any], like: dict[str, Any], end_s: float) -> JobSample:
    """The 5 s window ending at ``end_s`` of ``capture`` (a mutated copy of ``like``, or ``like``
    itself) with its SQL executions, as a 2 s-trigger query run of ``like``'s run id."""
    return sample_from_rest(
        capture.get("jobs"), capture.get("stages"), capture.get("progress"), capture.get("executors"),
        run_id=like["run_id"], trigger_interval_s=2.0, window_start_s=end_s - 5.0, window_end_s=end_s,
        collected_at=end_s + 1.0, sql=capture.get("sql"),
    )


JOIN = _small_capture_with_sql(JOIN_CAPTURE)
JOIN_END_S = batch_end_s(JOIN["progress"][-1]) + 0.001


def test_fuzz_join_stage_order_and_edges() -> None:
    """The stages' data-flow order (``stages.dataflow_order``, by ``rddIds``) and the edges from the SQL
    plan (``plan.stage_plan``) on the mutated stream-stream join capture, REST and SQL mutated
    together: a finite sample whose edges name its own vertices, or an error naming the field."""

    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        sample = _sample_with_sql(capture, JOIN, JOIN_END_S)
        _assert_finite_sample(sample)
        ids = [v.vertex_id for v in sample.vertices]
        assert all(u in ids[:ids.index(v.vertex_id)] for v in sample.vertices for u in v.upstream)
        assert not sample.vertices or sample.vertices[0].is_source

    unmutated = _sample_with_sql(JOIN, JOIN, JOIN_END_S)
    assert [v.upstream for v in unmutated.vertices] == [(), (), ("v0", "v1")]  # the edges come from the SQL plan
    _fuzz("stages.dataflow_order + plan.stage_plan + topology.sample_from_rest", mutated(JOIN), check,
          (SparkDataError, SampleError))


BROADCAST = _small_capture_with_sql(BROADCAST_CAPTURE)
BROADCAST_END_S = batch_end_s(BROADCAST["progress"][-1]) + 0.001


def test_fuzz_broadcast_jobs() -> None:
    """The broadcast job's tags (``stages.is_broadcast_job``) and the static side of the SQL plan
    (``plan.stage_plan``) on the mutated stream-static join capture: a finite sample, or an error
    naming the field."""

    def check(capture: dict) -> None:
        if not isinstance(capture, dict):
            return
        sample = _sample_with_sql(capture, BROADCAST, BROADCAST_END_S)
        _assert_finite_sample(sample)

    unmutated = _sample_with_sql(BROADCAST, BROADCAST, BROADCAST_END_S)
    assert [v.tasks for v in unmutated.vertices] == [2, 3]  # the broadcast job's stage is left out
    _fuzz("stages.is_broadcast_job + plan.stage_plan + topology.sample_from_rest", mutated(BROADCAST), check,
          (SparkDataError, SampleError))
