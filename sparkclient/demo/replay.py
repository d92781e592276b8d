"""A recorded Spark 4.3.0 capture replayed in the present: the query's micro-batches repeat forever,
each one shifted in time, batch id, job, stage and SQL execution ids, so that a collector reading it
sees a live query.

The capture (``tests/fixtures/spark-4.3.0``, see its README.txt): ``rate(2000 rows/s)`` → aggregation
→ ``foreachBatch``, a 2 s trigger, one Spark job of two stages per batch. Batches
``first..last`` of ``p1_recentProgress.json`` form one cycle of ``n`` batches (``n × trigger`` seconds);
cycle ``c`` shifts every timestamp by ``start + c × cycle − t(first)``, batch ids by ``c × n``, job ids
by ``c ×`` the capture's job id span, stage and SQL execution ids by ``c ×`` their span, and the rate
source's offsets (seconds since its creation) by ``c × cycle``. Only batches that completed by
``now`` are visible, as they would be in a live driver: the newest ``n`` batches' jobs and stages.

Every batch's SQL execution is the captured one (``p1_app_sql_29__details.json``: the plan is the
same for every batch) with its ids, description and time rewritten; every stage attempt's
``taskSummary`` gives the slowest task as :data:`SLOWEST_TASK_SHARE` times the stage's mean task.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: The recorded capture replayed (inside the repository).
CAPTURE_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "spark-4.3.0"
#: The slowest task's run time over the stage's mean task run time (the captured stage 29's
#: ``taskSummary`` has its 95th percentile at 1.08 times the mean).
SLOWEST_TASK_SHARE = 1.1

Json = dict[str, Any]

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})(Z|GMT)$")
_BATCH_LINE = re.compile(r"batch = (\d+)")
_ROOT_TAG = re.compile(r"-execution-root-id-(\d+)$")


def parse_time(text: str) -> float:
    """Epoch seconds of a Spark time string (``...T10:33:34.000Z`` or ``...T10:33:56.417GMT``).

    Raises:
        ValueError: not such a string.
    """
    match = _TIME.match(text)
    if not match:
        raise ValueError(f"not a Spark time: {text!r}")
    return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC).timestamp()


def _format_time(epoch_s: float, suffix: str) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(round(epoch_s * 1000)) % 1000:03d}{suffix}"


def _shift_times(value: Any, delta_s: float) -> Any:
    """A copy of ``value`` with every Spark time string moved by ``delta_s`` seconds."""
    if isinstance(value, dict):
        return {k: _shift_times(v, delta_s) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift_times(v, delta_s) for v in value]
    if isinstance(value, str) and (match := _TIME.match(value)):
        return _format_time(parse_time(value) + delta_s, match.group(2))
    return value


def _relabel(text: str, batch_id: int) -> str:
    return _BATCH_LINE.sub(f"batch = {batch_id}", text)


def _batch_of(doc: Json) -> int | None:
    match = _BATCH_LINE.search(str(doc.get("description") or ""))
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Capture:
    """The captured documents a replay serves (parsed once)."""

    applications: list[Json]
    progress: list[Json]
    jobs: list[Json]
    stages: list[Json]
    executors: list[Json]
    sql: Json

    @classmethod
    def load(cls, directory: Path = CAPTURE_DIR) -> Capture:
        def read(name: str) -> Any:
            return json.loads((directory / name).read_text())

        return cls(applications=read("p1_applications.json"), progress=read("p1_recentProgress.json"),
                   jobs=read("p1_app_jobs.json"), stages=read("p1_app_stages.json"),
                   executors=read("p1_app_executors.json"), sql=read("p1_app_sql_29__details.json"))

    @property
    def app_id(self) -> str:
        return str(self.applications[0]["id"])

    @property
    def run_id(self) -> str:
        return str(self.progress[-1]["runId"])


class Replay:
    """The capture's batches ``first..last`` repeated from ``start_s`` (epoch seconds) on.

    Batch ``k`` (0, 1, ...) of the replay is template batch ``first + k mod n`` of cycle ``k div n``;
    its Spark batch id is ``first + k``.
    """

    def __init__(self, capture: Capture, *, start_s: float, first: int = 3, last: int = 14) -> None:
        self.capture, self.start_s, self.first = capture, start_s, first
        by_id = {int(p["batchId"]): p for p in capture.progress}
        self.templates = [by_id[b] for b in range(first, last + 1)]
        self.n = len(self.templates)
        t0, t1 = parse_time(self.templates[0]["timestamp"]), parse_time(self.templates[-1]["timestamp"])
        self.trigger_s = round((t1 - t0) / (self.n - 1), 3)
        self.cycle_s = self.trigger_s * self.n
        self._t0 = t0
        self._jobs = {b: [j for j in capture.jobs if _batch_of(j) == b] for b in range(first, last + 1)}
        self._stages = {b: [s for s in capture.stages if _batch_of(s) == b] for b in range(first, last + 1)}
        ids = [s["stageId"] for s in capture.stages] + [capture.sql["id"]]
        self.job_span = max(j["jobId"] for j in capture.jobs) + 1
        self.id_span = max(ids) + 1
        self._cache: dict[tuple[str, int], bytes] = {}

    def _delta(self, cycle: int) -> float:
        return self.start_s + cycle * self.cycle_s - self._t0

    def _parts(self, k: int) -> tuple[int, int]:
        return divmod(k, self.n)

    def progress(self, k: int) -> Json:
        """Replay batch ``k``'s progress (timestamps, batch id and rate offsets shifted)."""
        cycle, i = self._parts(k)
        doc = _shift_times(self.templates[i], self._delta(cycle))
        doc["batchId"] = self.first + k
        for source in doc.get("sources") or ():
            for key in ("startOffset", "endOffset", "latestOffset"):
                if isinstance(source.get(key), int):
                    source[key] += int(cycle * self.cycle_s)
        return doc

    def end_s(self, k: int) -> float:
        """When replay batch ``k`` completed (its ``timestamp`` + ``triggerExecution``), epoch seconds."""
        cycle, i = self._parts(k)
        template = self.templates[i]
        took_s = template["durationMs"]["triggerExecution"] / 1000
        return parse_time(template["timestamp"]) + self._delta(cycle) + took_s

    def completed(self, now_s: float) -> int:
        """The newest replay batch completed by ``now_s`` (-1 before the first)."""
        k = max(-1, int((now_s - self.start_s) // self.trigger_s) + 1)
        while k >= 0 and self.end_s(k) > now_s:
            k -= 1
        return k

    def _job(self, job: Json, k: int) -> Json:
        cycle, _ = self._parts(k)
        doc = _shift_times(job, self._delta(cycle))
        doc["jobId"] += cycle * self.job_span
        doc["description"] = _relabel(doc.get("description") or "", self.first + k)
        doc["stageIds"] = [s + cycle * self.id_span for s in doc.get("stageIds") or ()]
        doc["jobTags"] = [_ROOT_TAG.sub(lambda m: f"-execution-root-id-{int(m.group(1)) + cycle * self.id_span}", t)
                          for t in doc.get("jobTags") or ()]
        return doc

    def _stage(self, stage: Json, k: int) -> Json:
        cycle, _ = self._parts(k)
        doc = _shift_times(stage, self._delta(cycle))
        doc["stageId"] += cycle * self.id_span
        doc["description"] = _relabel(doc.get("description") or "", self.first + k)
        return doc

    def _visible(self, now_s: float) -> range:
        newest = self.completed(now_s)
        return range(newest, max(-1, newest - self.n), -1)

    def body(self, what: str, now_s: float) -> bytes:
        """``jobs`` or ``stages`` as the driver lists them at ``now_s`` (newest first), JSON bytes;
        the same bytes for every call until the next batch completes."""
        newest = self.completed(now_s)
        key = (what, newest)
        if key not in self._cache:
            if len(self._cache) > 8:
                self._cache.clear()
            docs: list[Json] = []
            for k in self._visible(now_s):
                i = self._parts(k)[1]
                if what == "jobs":
                    docs += [self._job(j, k) for j in self._jobs[self.first + i]]
                else:
                    docs += [self._stage(s, k) for s in self._stages[self.first + i]]
            self._cache[key] = json.dumps(docs).encode()
        return self._cache[key]

    def sql(self, execution_id: int, now_s: float) -> Json | None:
        """The SQL execution ``execution_id`` when it is a visible batch's: its root execution (the
        ``foreachBatch`` call, which ran no job itself) or the root + 1 (the batch's query, with its
        job); else None."""
        for k in self._visible(now_s):
            cycle, i = self._parts(k)
            for job in self._jobs[self.first + i]:
                root = next((int(m.group(1)) for t in job.get("jobTags") or () if (m := _ROOT_TAG.search(t))), None)
                if root is None or execution_id - cycle * self.id_span not in (root, root + 1):
                    continue
                doc = _shift_times(self.capture.sql, self._delta(cycle) + parse_time(job["submissionTime"])
                                   - parse_time(self.capture.sql["submissionTime"]))
                ran = execution_id - cycle * self.id_span == root + 1
                doc.update(id=execution_id, rootExecutionId=root + cycle * self.id_span,
                           description=_relabel(doc.get("description") or "", self.first + k),
                           successJobIds=[job["jobId"] + cycle * self.job_span] if ran else [],
                           runningJobIds=[], failedJobIds=[])
                return doc
        return None

    def task_summary(self, stage_id: int, quantiles: list[float], now_s: float) -> Json | None:
        """The ``taskSummary`` of a visible stage attempt (the slowest task at :data:`SLOWEST_TASK_SHARE`
        of the mean, the mean below quantile 1), else None."""
        for k in self._visible(now_s):
            cycle, i = self._parts(k)
            for stage in self._stages[self.first + i]:
                if stage["stageId"] + cycle * self.id_span == stage_id and stage.get("numTasks"):
                    mean = stage["executorRunTime"] / stage["numTasks"]
                    slowest = min(stage["executorRunTime"], mean * SLOWEST_TASK_SHARE)
                    return {"quantiles": quantiles,
                            "executorRunTime": [slowest if q >= 1.0 else mean for q in quantiles]}
        return None

