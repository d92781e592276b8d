"""The snapshot path refuses what the loop refuses, fuzzed: ``FUZZ_EXAMPLES`` (10,000) inputs made from the
real captures (every capture set of ``tests/fixtures``, cut to its newest batches), each first changed the
ways that make a sample not ready (its SQL plans dropped, a batch's stages dropped, the previous batch
given to another run, only a run's first batch kept), then mutated field by field
(:func:`tests.sparkclient.collector.test_fuzz_parsers.mutated`), through
``sample_from_captures`` (over the whole capture or a window) and ``sample_to_scenario``.

Every sample with an issue (``JobSample.not_ready``, the loop's verdict) must be refused with a
``SampleNotReadyError`` carrying those issues: 0 scenarios from not-ready samples. The test prints how
many inputs were refused that way and how many made a scenario; both must be a real share of the inputs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import strategies as st

from sparkclient.collector.sample import SampleError
from sparkclient.collector.snapshot import (
    RatesUnavailableError,
    SampleNotReadyError,
    ScenarioRefusedError,
    load_captures,
    sample_from_captures,
    sample_to_scenario,
)
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.collector.stages import batch_jobs
from tests.capture_paths import P1_RUN_ID, SPARK_4_3_0
from tests.sparkclient.collector.test_fuzz_captures import CAPTURE_SETS
from tests.sparkclient.collector.test_fuzz_parsers import EXAMPLES, _fuzz, captures_of, mutated

pytestmark = pytest.mark.fuzz

Json = dict[str, Any]


def _without_sql(capture: Json) -> Json:
    return {**capture, "sql": []}


def _without_a_stage(capture: Json) -> Json:
    """The newest job's first stage gone from ``/stages`` (dropped past ``spark.ui.retainedStages``)."""
    gone = capture["jobs"][-1]["stageIds"][0]
    return {**capture, "stages": [s for s in capture["stages"] if s["stageId"] != gone]}


def _previous_batch_of_another_run(capture: Json) -> Json:
    """The progress before the kept batches moved to another run: a restart just before them."""
    progresses = [dict(p) for p in capture["progress"]]
    oldest = min(progresses, key=lambda p: p["batchId"])
    oldest["runId"] = "00000000-0000-0000-0000-000000000000"
    return {**capture, "progress": progresses}


def _p1_first_batch() -> Json:
    """p1 with its batch 0 only: the run's first batch after its start."""
    c = load_captures(SPARK_4_3_0)
    jobs = batch_jobs(c.jobs, P1_RUN_ID)[0]
    stage_ids = {sid for job in jobs for sid in job["stageIds"]}
    job_ids = {job["jobId"] for job in jobs}
    return {"jobs": jobs, "stages": [s for s in c.stages if s["stageId"] in stage_ids], "executors": c.executors,
            "sql": [e for e in c.sql if set(e.get("successJobIds") or ()) & job_ids],
            "progress": [p for p in c.progresses if p.get("runId") == P1_RUN_ID and p["batchId"] == 0]}


SEEDS = [change(capture) for capture in CAPTURE_SETS
         for change in (dict, _without_sql, _without_a_stage, _previous_batch_of_another_run)] + [_p1_first_batch()]
#: The windows a snapshot is taken over, seconds (None: every batch of the run in the captures).
WINDOWS_S = (None, 3.0, 30.0)


def test_fuzz_snapshot_makes_no_scenario_of_a_sample_that_is_not_ready() -> None:
    counts = {"not ready": 0, "scenario": 0}
    codes: Counter[str] = Counter()

    def check(args: tuple[Any, float | None]) -> None:
        capture, window_s = args
        if not isinstance(capture, dict):
            return
        try:
            sample = sample_from_captures(captures_of(capture), window_s=window_s)
        except (SparkDataError, SampleError):
            raise
        except ValueError as exc:  # the newest run has no progress left: refused with the reason
            assert "no progress of run" in str(exc)
            return
        try:
            sample_to_scenario(sample)
        except SampleNotReadyError as exc:
            assert sample.not_ready and exc.issues == sample.not_ready
            counts["not ready"] += 1
            codes.update(str(issue.code) for issue in exc.issues)
            return
        except (RatesUnavailableError, ScenarioRefusedError):
            assert sample.ready
            return
        except ValueError as exc:  # no vertex / no span: refused with the reason
            assert "sample" in str(exc)
            return
        assert sample.ready, f"a scenario of a sample that is not ready: {sample.not_ready}"
        counts["scenario"] += 1

    inputs = st.tuples(st.one_of(st.sampled_from(SEEDS), *(mutated(seed) for seed in SEEDS)),
                       st.sampled_from(WINDOWS_S))
    _fuzz("snapshot: not-ready captures -> sample -> no scenario", inputs, check, (SparkDataError, SampleError))
    print(f"fuzz snapshot readiness: {counts['not ready']} refused as not ready, {counts['scenario']} scenarios; "
          f"codes {dict(codes.most_common())}")
    assert counts["not ready"] >= EXAMPLES // 10 and counts["scenario"] >= EXAMPLES // 10, counts
