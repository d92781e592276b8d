"""A one-document capture (``tests.capture_paths``: the foreach-batch, join and broadcast queries)
served as Spark's REST API and collected as the live collect does."""

from __future__ import annotations

import copy
from typing import Any

from sparkclient.collector.collect import collect_sample
from sparkclient.collector.rest import SparkRestError
from sparkclient.collector.sample import JobSample


class CaptureClient:
    """Serves ``capture`` as ``SparkRestClient`` would (no task summaries: HTTP 404)."""

    def __init__(self, capture: dict[str, Any]) -> None:
        self.capture = capture

    def jobs(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        return copy.deepcopy(self.capture["jobs"])

    def stages(self, app_id: str, status: object = None) -> list[dict[str, Any]]:
        wanted = None if status is None else {s.upper() for s in ([status] if isinstance(status, str) else status)}
        return [copy.deepcopy(s) for s in self.capture["stages"] if wanted is None or s["status"] in wanted]

    def executors(self, app_id: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self.capture["executors"])

    def sql_execution(self, app_id: str, execution_id: int, details: bool = True) -> dict[str, Any]:
        for execution in self.capture["sql"]:
            if execution["id"] == execution_id:
                return copy.deepcopy(execution)
        raise SparkRestError("GET .../sql failed with HTTP 404", url="u", status=404, attempts=1)

    def task_summary(self, app_id: str, stage_id: int, attempt: int, quantiles: object = (1.0,)) -> dict[str, Any]:
        raise SparkRestError("GET .../taskSummary failed with HTTP 404", url="u", status=404, attempts=1)


def collect_capture(capture: dict[str, Any], client: CaptureClient | None = None, *, window_s: float = 16.0,
                    **kwargs: Any) -> JobSample:
    """``collect_sample`` over the last ``window_s`` seconds of ``capture`` (at its ``now_s``), through
    ``client`` (None: a :class:`CaptureClient` of it); ``kwargs`` go to ``collect_sample``."""
    return collect_sample(CaptureClient(capture) if client is None else client, capture["app_id"],
                          capture["progresses"], run_id=capture["run_id"],
                          trigger_interval_s=capture["trigger_interval_s"], window_s=window_s,
                          now_s=capture["now_s"], **kwargs)
