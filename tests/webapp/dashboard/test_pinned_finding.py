"""A pinned bottleneck through the web path: the stage's binding pin reaches the plan as its cause,
the plan keeps the cores that cannot help it (diminishing returns), and the job page's "why" list
names the finding with its action and evidence."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from scaling.values.findings import PinnedAction
from scaling.values.reasons import Limit
from scaling.values.topology import PinCause
from scaling.words.reason_text import finding_text
from tests.webapp.dashboard.test_dashboard import why_items
from tests.webapp.factories import PLAN_STAGES, make_job, make_snapshots, make_user
from webapp.jobs.models import Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.window import window_inputs

pytestmark = pytest.mark.django_db

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def pinned_enrich_job() -> Job:
    """The 3-stage job on 1 core whose enrich stage (1 task, 15 busy s per 15 s window, the backlog
    growing) and aggregation keep state in the HDFS-backed store: the checkpoint pins their partitions."""
    job = make_job(metric_window_s=45)
    stages = [PLAN_STAGES[0], {**PLAN_STAGES[1], "stateful": True, "state_store": HDFS},
              {**PLAN_STAGES[2], "state_store": HDFS}]
    Job.objects.filter(pk=job.pk).update(plan_stages=stages)
    job.refresh_from_db()
    return job


def test_the_binding_pin_reaches_the_plan_and_the_job_page_names_the_finding(client):
    job = pinned_enrich_job()
    snapshots = make_snapshots(job, count=4)
    topology, *_ = window_inputs(job=job, snapshots=snapshots)
    assert topology.vertex("v1").pin_cause == PinCause.STATE_STORE and not topology.vertex("v1").adjustable
    assert topology.vertex("v0").pin_cause is None
    evaluation = evaluation_run(job=job)
    plan = evaluation.job_plan
    assert evaluation.decision == "no-change" and plan.executors_proposed == 1, evaluation.plan
    assert plan.limit(Limit.DIMINISHING_RETURNS) is not None and plan.limit(Limit.PINNED_STAGE).vertex_id == "v1"
    [finding] = plan.findings
    assert (finding.action, finding.vertex_id) == (PinnedAction.NEW_CHECKPOINT_PARTITIONS, "v1")
    assert finding.data["tasks"] == 1 and finding.data["cause"] == "state-store" and finding.data["fill"] > 1
    assert not job.proposals.exists()
    client.force_login(make_user("vera", role="viewer"))
    why = why_items(client.get(f"/jobs/{job.pk}/").content.decode())
    assert why["findings"] == escape("what cores cannot fix: " + finding_text(finding))
    assert "spark.sql.shuffle.partitions" in why["findings"]
