"""Propose (``webapp.loop.propose``): an evaluation becomes the job's one pending proposal, revised,
kept or withdrawn; pinned knobs are never proposed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scaling.values.reasons import PlanReason
from scaling.words.reason_text import reason_text
from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.jobs.models import Evaluation, Job
from webapp.loop.evaluate import evaluation_run
from webapp.loop.propose import material_change, proposal_create
from webapp.proposals.lifecycle import TransitionError
from webapp.proposals.models import AuditEvent, Proposal
from webapp.proposals.predictions import demand_cores, plan_cores
from webapp.proposals.reasons import WithdrawReason
from webapp.proposals.services import proposal_approve

pytestmark = pytest.mark.django_db


def test_under_provisioned_window_creates_a_scale_up_proposal():
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation = evaluation_run(job=job)
    assert evaluation.decision == "scale"
    proposal = job.proposals.get()
    assert proposal.status == Proposal.Status.PENDING
    assert proposal.current_config["cores"] == 1
    # The enrich stage is busy 15 s per 15 s window on one core at 450 rec/s: it needs more cores.
    assert proposal.proposed_config["cores"] > 1
    assert proposal.proposed_config["enrich_partitions"] == proposal.proposed_config["cores"]
    # the stateful stage is bound to its knob (plan + tasks agree): it follows the plan (offline repartition)
    stateful = evaluation.job_plan.vertex("v2")
    assert proposal.proposed_config["state_partitions"] == stateful.proposed
    assert proposal.proposed_config["trigger_interval_s"] == 2  # a setting, never scaled
    assert proposal.reason_values[0].code == PlanReason.LOAD_ABOVE_BAND
    assert proposal.reason_values == evaluation.job_plan.reasons
    proposed = AuditEvent.objects.get(proposal=proposal, action="proposed", actor_name="policy:ds2", actor_user=None)
    assert proposed.reason == {"code": "plan_reasons", "data": {"reasons": proposal.reasons}}
    assert proposed.reason_text == "; ".join(map(reason_text, proposal.reason_values))  # the plan's own words


def test_a_growing_backlog_keeps_the_pending_proposal_and_a_new_demand_revises_it_in_place():
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    first = evaluation_run(job=job)
    evaluation_run(job=job)
    assert job.proposals.count() == 1
    proposal = job.proposals.get()
    later = timezone.now() + timedelta(seconds=60)
    make_snapshots(job, count=4, backlog_step=50_000, end=later)  # a large backlog to catch up on
    evaluation_run(job=job, now=later)
    proposal.refresh_from_db()
    # The catch-up grew, the demand at the target rate did not: not a material change.
    assert (proposal.status, proposal.revision, proposal.evaluation) == ("pending", 1, first)
    even_later = later + timedelta(seconds=60)
    make_snapshots(job, count=4, arrival=2400.0, enrich_busy_s=40.0, end=even_later)  # the load more than doubled
    evaluation_run(job=job, now=even_later)
    proposal.refresh_from_db()
    assert job.proposals.count() == 1 and proposal.status == "pending" and proposal.revision == 2
    assert [r["revision"] for r in proposal.revisions] == [1] and proposal.revisions[0]["evaluation"] == first.pk
    assert proposal.prediction["inputs"]["demand_cores"] > 2 * proposal.revisions[0]["prediction"]["inputs"][
        "demand_cores"]
    assert AuditEvent.objects.filter(proposal=proposal, action="revised").count() == 1


def test_a_proposal_capped_at_the_maximum_is_not_revised_while_its_configuration_stays_the_same():
    """At ``max_cores`` the pending configuration never carries the demand (its utilization at the
    target rate stays above the band), and every evaluation proposes the same configuration again.
    That is no material change: the revision stays, so an approval of it is not refused as outdated.
    Before, such a proposal was revised at every evaluation (seen in make demo at 1,600 events/s:
    six revisions in 75 s, all 'cores 1 -> 2, ...', predicted 155 %)."""
    job = make_job(metric_window_s=45, max_cores=2)
    start = timezone.now()
    make_snapshots(job, count=4, arrival=2400.0, enrich_busy_s=40.0, end=start)  # needs far more than 2 cores
    evaluation_run(job=job, now=start)
    proposal = job.proposals.get()
    assert proposal.proposed_config["cores"] == 2 and proposal.revision == 1
    for step in range(1, 4):
        later = start + timedelta(seconds=30 * step)
        make_snapshots(job, count=4, arrival=2400.0 * (1 + 0.05 * step), enrich_busy_s=40.0, end=later)
        evaluation = evaluation_run(job=job, now=later)
        assert evaluation.proposed_config == proposal.proposed_config
    proposal.refresh_from_db()
    assert (proposal.status, proposal.revision, proposal.revisions) == ("pending", 1, [])
    assert not AuditEvent.objects.filter(proposal=proposal, action="revised").exists()


def test_a_pending_proposal_is_withdrawn_when_the_running_configuration_changes_underneath_it():
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    proposal = job.proposals.get()
    running = dict(job.config, source_partitions=3)
    Job.objects.filter(pk=job.pk).update(config=running)  # e.g. someone restarted the runner by hand
    job.refresh_from_db()
    evaluation_run(job=job)
    proposal.refresh_from_db()
    assert proposal.status == "withdrawn"
    assert proposal.withdrawal == {"reason": "config_changed", "proposed_for": proposal.current_config,
                                   "running": running}
    event = AuditEvent.objects.get(proposal=proposal, action="withdrawn")
    assert event.after == {"status": "withdrawn", "withdrawal": proposal.withdrawal}
    assert event.reason == {"code": "config_changed", "data": {"proposed_for": proposal.current_config,
                                                               "running": running}}
    with pytest.raises(TransitionError, match="is withdrawn, not pending"):
        proposal_approve(proposal=proposal, actor=make_user())


def test_a_stateful_stage_whose_checkpoint_cannot_be_repartitioned_is_never_proposed(client):
    """The runner publishes the state store a stateful stage's checkpoint holds state in. HDFS-backed
    state cannot be repartitioned offline, so the runner would refuse a state_partitions change
    (``state-not-repartitionable``, found approving such a proposal on a user's foreachBatch pipeline):
    the stage is pinned, the proposal leaves the knob alone, and the job page says why."""
    from tests.webapp.factories import PLAN_STAGES

    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    bound, pinned = make_job(name="rocks", metric_window_s=45), make_job(name="hdfs", metric_window_s=45)
    Job.objects.filter(pk=bound.pk).update(plan_stages=[
        {**s, "state_store": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}
        if s["stateful"] else s for s in PLAN_STAGES])
    Job.objects.filter(pk=pinned.pk).update(plan_stages=[{**s, "state_store": hdfs} if s["stateful"] else s
                                                         for s in PLAN_STAGES])
    for job in (bound, pinned):
        job.refresh_from_db()
        make_snapshots(job, count=4)
        assert evaluation_run(job=job).decision == "scale"
    scaled, kept = bound.proposals.get(), pinned.proposals.get()
    assert scaled.proposed_config["state_partitions"] != scaled.current_config["state_partitions"]
    assert kept.proposed_config["state_partitions"] == kept.current_config["state_partitions"] == 2
    # The rest still scales; the planner sizes it around the pinned stage (which keeps its 2 tasks).
    assert kept.proposed_config["cores"] >= scaled.proposed_config["cores"] > 1
    assert kept.job_plan.vertex("v2").proposed == 2

    user = make_user(username="watcher", role="viewer")
    client.force_login(user)
    page = client.get(f"/jobs/{pinned.pk}/").content.decode()
    assert 'data-pinned="state_partitions"' in page
    assert "pinned by the checkpoint at 2: its state is in HDFSBackedStateStoreProvider" in page
    assert 'data-pinned=' not in client.get(f"/jobs/{bound.pk}/").content.decode()
    assert 'data-pinned="state_partitions"' in client.get(f"/proposals/{kept.pk}/").content.decode()  # pending


def test_a_pending_proposal_that_changes_a_knob_the_checkpoint_now_pins_is_withdrawn(client):
    """The runner publishes the checkpoint's state store with the plan at the first batch of a run; a
    proposal made before (or by an older version) that changes the pinned knob would fail three times
    at the runner. It is withdrawn with its structured reason, and the next proposal leaves the knob."""
    from tests.webapp.factories import PLAN_STAGES
    from webapp.proposals.reasons import WithdrawReason

    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4)
    evaluation_run(job=job)
    first = job.proposals.get()
    assert first.proposed_config["state_partitions"] != first.current_config["state_partitions"]
    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    Job.objects.filter(pk=job.pk).update(plan_stages=[{**s, "state_store": hdfs} if s["stateful"] else s
                                                      for s in PLAN_STAGES])
    job.refresh_from_db()
    evaluation_run(job=job)
    first.refresh_from_db()
    assert first.status == Proposal.Status.WITHDRAWN
    assert first.withdrawal == {"reason": WithdrawReason.KNOB_PINNED.value, "knobs": ["state_partitions"]}
    assert AuditEvent.objects.get(proposal=first, action="withdrawn").reason == {
        "code": WithdrawReason.KNOB_PINNED.value, "data": {"knobs": ["state_partitions"]}}
    user = make_user(username="watcher", role="viewer")
    client.force_login(user)
    page = client.get(f"/proposals/{first.pk}/").content.decode()
    # a decided one: its own story
    assert 'id="withdrawal" data-reason="knob_pinned"' in page and "data-pinned=" not in page
    second = job.proposals.get(status=Proposal.Status.PENDING)
    assert second.proposed_config["state_partitions"] == second.current_config["state_partitions"]
    assert second.proposed_config["cores"] > second.current_config["cores"]


def test_a_stateful_stage_writing_to_a_file_sink_is_pinned_and_the_page_says_why(client):
    """RocksDB state, but the file sink's own batch log would miss the offline repartition's batch
    (found on a user's dedupe -> parquet query, which then failed at every start): pinned."""
    from tests.webapp.factories import PLAN_STAGES

    rocks = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    job = make_job(metric_window_s=45)
    Job.objects.filter(pk=job.pk).update(plan_stages=[{**s, "state_store": rocks, "sink": "FileStreamSink"}
                                                      if s["stateful"] else s for s in PLAN_STAGES])
    job.refresh_from_db()
    make_snapshots(job, count=4)
    assert evaluation_run(job=job).decision == "scale"
    proposal = job.proposals.get()
    assert proposal.proposed_config["state_partitions"] == proposal.current_config["state_partitions"]
    client.force_login(make_user(username="watcher", role="viewer"))
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "the query writes to a FileStreamSink, whose own batch log would miss the batch" in page


# --- withdrawal: ``withdraw_after_evaluations`` unsupported evaluations in a row ---------------------

def _pending_with_its_evaluation(**job_args):
    job = make_job(metric_window_s=45, **job_args)
    make_snapshots(job, count=4)
    evaluation = evaluation_run(job=job)
    return job.proposals.get(status=Proposal.Status.PENDING), evaluation


def _another(evaluation: Evaluation, direction: str) -> Evaluation:
    """A copy of ``evaluation`` that points ``direction`` (``up`` supports a scale-up proposal)."""
    copy = Evaluation.objects.get(pk=evaluation.pk)
    copy.pk = None
    copy.direction = direction
    copy.decision = "scale" if direction != Evaluation.Direction.NONE else "none"
    copy.save()
    return copy


def _observe_all(proposal: Proposal, first: Evaluation, directions: list[str]) -> Proposal:
    for direction in directions:
        proposal_create(evaluation=_another(first, direction), plan=first.job_plan)
    proposal.refresh_from_db()
    return proposal


def test_one_unsupported_evaluation_short_of_the_count_keeps_the_proposal_and_the_count_withdraws_it():
    proposal, first = _pending_with_its_evaluation()
    n = proposal.job.policy.withdraw_after_evaluations
    assert n >= 2
    kept = _observe_all(proposal, first, ["none"] * (n - 1))
    assert kept.status == Proposal.Status.PENDING and len(kept.unsupported_by) == n - 1
    withdrawn = _observe_all(kept, first, ["none"])
    assert withdrawn.status == Proposal.Status.WITHDRAWN
    assert withdrawn.withdrawal["reason"] == WithdrawReason.INSIDE_BAND
    assert len(withdrawn.withdrawal["evaluations"]) == n


def test_a_supporting_evaluation_between_two_short_runs_resets_the_count():
    proposal, first = _pending_with_its_evaluation()
    n = proposal.job.policy.withdraw_after_evaluations
    # 2 (n - 1) unsupported evaluations, but never n in a row: the proposal stays.
    kept = _observe_all(proposal, first, ["none"] * (n - 1) + ["up"] + ["none"] * (n - 1))
    assert kept.status == Proposal.Status.PENDING and len(kept.unsupported_by) == n - 1


@pytest.mark.parametrize(("last", "reason"), [
    ("none", WithdrawReason.INSIDE_BAND),  # every one inside the band
    ("down", WithdrawReason.NOT_SUPPORTED),  # inside the band, then the other way
])
def test_the_withdrawal_reason_names_what_the_unsupported_run_said(last, reason):
    proposal, first = _pending_with_its_evaluation()
    n = proposal.job.policy.withdraw_after_evaluations
    withdrawn = _observe_all(proposal, first, ["none"] * (n - 1) + [last])
    assert (withdrawn.status, withdrawn.withdrawal["reason"]) == (Proposal.Status.WITHDRAWN, reason)
    assert withdrawn.withdrawal["directions"] == ["none"] * (n - 1) + [last]


def test_a_run_pointing_the_other_way_withdraws_as_opposite():
    proposal, first = _pending_with_its_evaluation()
    n = proposal.job.policy.withdraw_after_evaluations
    withdrawn = _observe_all(proposal, first, ["down"] * n)
    assert withdrawn.withdrawal["reason"] == WithdrawReason.OPPOSITE


# --- revision: a material change of the demand (``revision_min_change``) or of what carries it -------

@pytest.mark.parametrize(("sized_for", "material"), [(0.5, False), (0.4999, True)])
def test_a_demand_moved_by_the_threshold_is_kept_and_just_past_it_is_revised(sized_for, material):
    proposal, evaluation = _pending_with_its_evaluation()
    # The pending revision was sized for ``sized_for × new``; a threshold of 1.0 is crossed past doubling.
    # (0.5: the demand doubled exactly, ``new − old == 1.0 × old`` with no rounding.)
    threshold, new = 1.0, demand_cores(evaluation.job_plan)
    old = new * sized_for
    proposal.prediction = {**proposal.prediction, "inputs": {**proposal.prediction["inputs"], "demand_cores": old}}
    wide = (0.0, 1e9)  # the second rule (the pending configuration no longer carries the demand) out of play
    assert material_change(proposal, evaluation, evaluation.job_plan, threshold=threshold, band=wide) is material


@pytest.mark.parametrize(("above", "other_config", "material"), [
    (False, True, False),  # the pending configuration carries the demand exactly at the band's top
    (True, True, True),  # just past it, and the evaluation proposes another configuration
    (True, False, False),  # past it, but proposing the pending configuration again (a capped plan)
])
def test_a_pending_configuration_past_the_band_is_revised_only_for_another_one(above, other_config, material):
    proposal, evaluation = _pending_with_its_evaluation()
    new = demand_cores(evaluation.job_plan)
    _, cores = plan_cores(proposal.job_plan)
    top = new / cores * (0.9999 if above else 1.0)
    if other_config:
        evaluation.proposed_config = {**proposal.proposed_config, "cores": proposal.proposed_config["cores"] + 1}
    else:
        evaluation.proposed_config = dict(proposal.proposed_config)
    proposal.prediction = {**proposal.prediction, "inputs": {**proposal.prediction["inputs"], "demand_cores": new}}
    assert material_change(proposal, evaluation, evaluation.job_plan, threshold=0.25, band=(0.0, top)) is material
