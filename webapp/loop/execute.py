"""Execution of an approved proposal: send each attempt to the runner and return; the reconcile beat
records the runner's answer (no worker waits on a runner).

An attempt is claimed with a conditional UPDATE on the execution row (``lifecycle.attempt_transition``)
right before the configuration goes to the runner, so a second delivery of the same task, or a
racing reconcile, never sends it twice. While an attempt is in flight the row holds a lease of
``SCALER_EXECUTION_TIMEOUT_S`` plus a margin. Each reconcile beat (``webapp.loop.reconcile``) reads
the runner's answer of every attempt in flight and records it here; an attempt still unanswered when
its lease expires is ``unanswered``: its outcome is unknown. Failed and unanswered attempts are
retried under the job's restart strategy (``backoff``); when the retries are spent the job rolls back
to its last configuration that succeeded (``webapp.proposals.rollback``).

An approved proposal starts (approved → executing) only when its Spark cluster has a free slot and
its cooldown has passed (``webapp.loop.throttle``); until then it stays approved with the reason in
``Proposal.waiting``, and is enqueued again when a slot frees.

Every attempt carries the execution's idempotency key: a runner that applied an unanswered attempt
answers the next one with that apply (a replay), and the earlier attempt is recorded as the applied
one (``webapp.loop.applied``).

An attempt succeeds only when the new configuration has run: a restart's answer comes with its first
batch on it (``sparkclient.runner.firstbatch``); a "nothing to change" answer (the runner found the
configuration applied) is recorded only once the runner's current run runs that configuration and
has completed a batch (:func:`ran_on_configuration`). Until then the attempt stays in flight; at its
lease it fails ``no-first-batch``, and the back-off and rollback rules apply.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scaling.values.state import state_from_dict, state_to_dict
from sparkclient.collector.progress import ran_a_batch, read_newest_progress
from sparkclient.collector.sparkjson import SparkDataError
from sparkclient.contract import control
from sparkclient.contract.messages import (
    MAX_TEXT,
    FailureCode,
    ProtocolError,
    RescaleCommand,
    RescalePath,
    RescaleResult,
    ResultStatus,
)
from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.redis import get_redis
from webapp.loop import throttle
from webapp.loop.applied import applied_at, applied_attempt, success_log
from webapp.loop.backoff import RestartStrategy, next_retry
from webapp.loop.rescale_cost import time_to_effect_s
from webapp.proposals import dispatch
from webapp.proposals.attempts import AttemptEntry, RetryDecision, entries_to_json
from webapp.proposals.codes import Actor, AuditAction, AuditReason, Reason, RetryCode
from webapp.proposals.lifecycle import (
    AttemptOutcome,
    AttemptState,
    ExecutionStatus,
    Status,
    TransitionError,
    attempt_transition,
    audit,
    transition,
)
from webapp.proposals.models import Execution, Proposal, result_json
from webapp.proposals.predictions import executor_record
from webapp.proposals.rollback import last_good_config, start_rollback

logger = logging.getLogger(__name__)

#: The newest published progress documents searched for a batch of the current run, when a "nothing to
#: change" answer waits for one (at a 1 s trigger, the last 100 s of it).
PROOF_PROGRESS = 100


def lease_s() -> float:
    """Seconds an attempt may stay unanswered before it counts as ``unanswered`` and is retried."""
    return settings.SCALER_EXECUTION_TIMEOUT_S + settings.SCALER_EXECUTION_LEASE_MARGIN_S


def _restart_strategy(policy: JobPolicy) -> RestartStrategy:
    return RestartStrategy(kind=policy.restart_strategy, attempts=policy.restart_attempts,
                           delay_s=policy.restart_delay_s, max_delay_s=policy.restart_max_delay_s,
                           multiplier=policy.restart_backoff_multiplier,
                           max_failures_per_interval=policy.failure_rate_max_failures,
                           interval_s=policy.failure_rate_interval_s)


def unanswered(command_id: str, error: str, now: datetime | None = None) -> RescaleResult:
    """A failure the web app records for an attempt the runner did not answer (a malformed answer, a
    command that could not be sent, a lease that expired): no runner code, so the restart strategy
    decides whether to retry."""
    return RescaleResult(id=command_id, status=ResultStatus.FAILED, path=RescalePath.NONE,
                                 error=error[:MAX_TEXT], completed_at=(now or timezone.now()).timestamp())


def runner_result(redis, job_name: str, command_id: str) -> RescaleResult | None:
    """The runner's stored answer to ``command_id``, None when there is none; a malformed one counts
    as a failure naming the field."""
    try:
        return control.get_result(redis, job_name, command_id)
    except ProtocolError as exc:
        return unanswered(command_id, f"malformed runner result: {exc}")


def ran_on_configuration(redis, job_name: str, knobs: dict[str, int]) -> bool:
    """Whether the runner of ``job_name`` runs ``knobs`` and has completed a batch on them: its status
    says it is running a run (``run_id``) on ``knobs``, and one of the newest :data:`PROOF_PROGRESS`
    published progress documents is an executed batch of that run (not an idle trigger). A malformed
    status or progress proves nothing (False)."""
    try:
        status = control.read_status(redis, job_name)
        if not status.running or not status.run_id or status.knobs != knobs:
            return False
        return any(p.get("runId") == status.run_id and ran_a_batch(p)
                   for p in read_newest_progress(redis, job_name, PROOF_PROGRESS))
    except (ProtocolError, SparkDataError):
        return False


def proven(redis, execution: Execution, result: RescaleResult) -> bool:
    """Whether ``result`` may be recorded as the outcome: anything but a succeeded "nothing to change",
    which counts only once a batch ran on its configuration (:func:`ran_on_configuration`; the knobs
    it names, else the proposal's)."""
    if not (result.succeeded and result.path is RescalePath.NONE):
        return True
    proposal = execution.proposal
    return ran_on_configuration(redis, proposal.job.name, result.knobs or proposal.proposed_config)


def unproven(result: RescaleResult, now: datetime) -> RescaleResult:
    """The failure recorded for a "nothing to change" ``result`` still without a batch on its
    configuration when its lease expired: ``no-first-batch``, retried under the restart strategy."""
    return replace(RescaleResult.failed(
        result.id, FailureCode.NO_FIRST_BATCH, knobs=result.knobs,
        error=f"the runner found the configuration applied, but no batch completed on it within the lease "
              f"({lease_s():.0f} s)"), completed_at=now.timestamp())


# --- send ----------------------------------------------------------------------------------------

def _start(proposal: Proposal) -> Reason | None:
    """approved → executing, and the proposal's one execution row (a second delivery finds it), when
    the cluster's throttle gives it a slot (``webapp.loop.throttle``); else the reason it waits."""
    if proposal.kind == Proposal.Kind.SCALE and proposal.job.policy.mode == JobPolicy.Mode.ADVISOR:
        Proposal.objects.filter(pk=proposal.pk).update(waiting={})  # never runs: it holds no place in the queue
        raise TransitionError(f"proposal {proposal.pk}: the job is in advisor mode, nothing is executed")

    def start() -> None:
        try:
            transition(proposal=proposal, target=Status.EXECUTING, actor=Actor.SYSTEM, waiting={},
                       reason=Reason(AuditReason.EXECUTION_STARTED, {"kind": proposal.kind}))
            Execution.objects.create(proposal=proposal, lease_expires_at=timezone.now() + timedelta(seconds=lease_s()))
        except TransitionError:
            pass  # another delivery started it; the claim decides

    return throttle.start_or_hold(proposal, start)


def _claim(execution: Execution, attempt: int) -> bool:
    """Claim attempt ``attempt`` (pending or waiting_retry → sent), with a fresh lease."""
    return attempt_transition(execution_id=execution.pk, attempts=attempt - 1, target=AttemptState.SENT,
                              match={"proposal__status": Status.EXECUTING}, next_attempt_at=None,
                              lease_expires_at=timezone.now() + timedelta(seconds=lease_s()))


def attempt_send(*, proposal_id: int, attempt: int = 1) -> Execution | None:
    """Send attempt ``attempt`` of an approved proposal's execution to its runner, and return: the
    reconcile beat records the answer (``webapp.loop.reconcile.execution_poll``). Steps: start the execution (first
    attempt), claim the attempt, take a late answer of the previous attempt as the outcome, send.

    Idempotent: an attempt already claimed, or a proposal no longer executing, returns the
    execution without sending anything. Returns None, sending nothing, when the cluster's throttle
    holds the proposal (``Proposal.waiting``); held by the cooldown, it is enqueued again for its end.

    Raises:
        TransitionError: attempt 1 of a proposal that is neither approved nor executed, or of an
            advisor-mode job's scale proposal.
    """
    proposal = Proposal.objects.select_related("job", "job__policy").get(pk=proposal_id)
    if proposal.status == Status.APPROVED:
        waiting = _start(proposal)
        if waiting is not None:
            logger.info("proposal %s waits for a slot on cluster %s (%s)", proposal_id, proposal.job.cluster,
                        waiting.code)
            again_s = throttle.retry_after_s(waiting, timezone.now())
            if again_s is not None:
                dispatch.enqueue_attempt(proposal_id, 1, countdown_s=again_s)
            return None
    execution = Execution.objects.filter(proposal_id=proposal_id).first()
    if execution is None:
        raise TransitionError(f"proposal {proposal_id} is {proposal.status}, not approved: nothing to execute")
    if not _claim(execution, attempt):
        logger.info("proposal %s attempt %s: already claimed or finished; nothing to do", proposal_id, attempt)
        execution.refresh_from_db()
        return execution
    execution.refresh_from_db()
    job, redis = proposal.job, get_redis()
    if attempt > 1:
        # The previous attempt may have timed out while the runner went on and applied it: its
        # late answer is the outcome (with the real path and downtime); send nothing again.
        late = runner_result(redis, job.name, execution.exec_id(attempt - 1))
        if late is not None and late.succeeded and proven(redis, execution, late):
            audit(job=job, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.LATE_ANSWER,
                  after={"attempt": attempt - 1, "path": str(late.path)},
                  reason=Reason(AuditReason.LATE_SUCCESS, {"attempt": attempt - 1}))
            return execution_record_result(execution_id=execution.pk, attempt=attempt, result=late)
    exec_id = execution.exec_id(attempt)
    audit(job=job, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.ATTEMPT_STARTED,
          after={"attempt": attempt, "exec_id": exec_id, "config": proposal.proposed_config},
          reason=Reason(AuditReason.ATTEMPT_SENT, {"attempt": attempt, "job": job.name}))
    try:
        control.send_command(redis, job.name, RescaleCommand(
            id=exec_id, knobs=proposal.proposed_config, idempotency_key=execution.idempotency_key))
    except (OSError, ValueError) as exc:
        return execution_record_result(execution_id=execution.pk, attempt=attempt,
                                       result=unanswered(exec_id, str(exc)))
    return execution


def measured_restart(result: RescaleResult) -> bool:
    """Whether ``result`` is a restart whose downtime was measured: a succeeded restart path, answered by
    its first batch on the new configuration (``sparkclient.runner.firstbatch``). A "nothing to change"
    answer measured nothing, whatever its ``downtime_s``; an in-place change restarted nothing."""
    return result.succeeded and result.path not in (RescalePath.NONE, RescalePath.IN_PLACE)


def measured_cost_s(result: RescaleResult) -> tuple[float | None, float | None]:
    """(downtime, pause) of a succeeded ``result``, seconds, as recorded: a measured restart's, an
    in-place change's (the query never stopped: 0), else (None, None), not measured (no batch
    on the new configuration measured them, whatever the answer's figures)."""
    if measured_restart(result) or result.path is RescalePath.IN_PLACE:
        return result.downtime_s, result.pause_s
    return None, None


# --- record --------------------------------------------------------------------------------------

def _attempt_entry(execution: Execution, attempt: int, result: RescaleResult, now: datetime,
                   no_answer: bool) -> AttemptEntry:
    outcome = (AttemptOutcome.UNANSWERED if no_answer else
               AttemptOutcome.SUCCEEDED if result.succeeded else AttemptOutcome.FAILED)
    return AttemptEntry(attempt, execution.exec_id(attempt), outcome, now, error=result.error, path=result.path)


def execution_record_result(*, execution_id: int, attempt: int, result: RescaleResult,
                            now: datetime | None = None, no_answer: bool = False) -> Execution | None:
    """Record the runner's answer to attempt ``attempt``: success finishes the proposal and updates
    the job's configuration; a failure schedules a retry under the restart strategy, or, with the
    retries spent (or at once, when the runner refused the command for what it is:
    ``FailureCode.retryable``), fails the proposal and rolls the job back to its last good configuration.
    ``no_answer``: ``result`` stands for no answer before the lease (the outcome is unknown), retried
    like a failure but not recorded as one.

    Idempotent: the outcome is recorded only while that attempt is the one in flight (conditional
    UPDATE); otherwise returns the execution unchanged.
    """
    now = now or timezone.now()
    execution = Execution.objects.select_related("proposal", "proposal__job", "proposal__job__policy").get(
        pk=execution_id)
    entry = _attempt_entry(execution, attempt, result, now, no_answer)
    with transaction.atomic():
        if entry.status is AttemptOutcome.SUCCEEDED:
            _record_success(execution, attempt, result, entry, now)
        else:
            _record_failure(execution, attempt, result, entry, now)
    execution.refresh_from_db()
    if execution.status != ExecutionStatus.RUNNING:
        throttle.wake_waiting(execution.proposal.job)  # its slot on the cluster is free
    return execution


def _record_success(execution: Execution, attempt: int, result: RescaleResult, entry: AttemptEntry,
                    now: datetime) -> None:
    """sent → done (succeeded); the job runs the applied configuration; the proposal succeeded. The
    applied attempt may be an earlier one (a replay, or a late answer: ``webapp.loop.applied``)."""
    proposal, job = execution.proposal, execution.proposal.job
    applied = applied_attempt(execution, attempt, result.replay_of or result.id)
    replayed = applied != attempt and bool(result.replay_of)
    if applied != attempt:
        now = applied_at(execution, result.completed_at, now)
    downtime_s, pause_s = measured_cost_s(result)
    log = success_log(execution, entry, applied=applied, replayed=replayed, finished_at=now, path=result.path,
                      downtime_s=downtime_s, pause_s=pause_s)
    if not attempt_transition(execution_id=execution.pk, attempts=attempt, target=AttemptState.DONE,
                              status=ExecutionStatus.SUCCEEDED, path=str(result.path), applied_attempt=applied,
                              downtime_s=downtime_s, pause_s=pause_s, finished_at=now, error="",
                              time_to_effect_s=time_to_effect_s(execution, result, answered_at=now),
                              result=result_json(result), lease_expires_at=None,
                              attempt_log=entries_to_json(log)):
        return
    config = result.knobs or proposal.proposed_config
    # What the proposal changed from: the collector may have stored the runner's new configuration
    # already (a handover's new driver reports it before its answer arrives).
    before = proposal.current_config or Job.objects.filter(pk=job.pk).values_list("config", flat=True).first()
    # The job's memory (FLIP-271 state store): the applied scalings (the executors' for observed
    # scalability), and the measured downtime, for restart-time tracking; pending scale-downs clear.
    state = state_from_dict(Job.objects.filter(pk=job.pk).values_list("scaler_state", flat=True).first())
    plan = proposal.job_plan
    if plan is not None:
        latest = job.snapshots.order_by("-collected_at").first()
        sources = {v.vertex_id for v in latest.vertices.all() if v.is_source} if latest is not None else set()
        state = state.with_records((*plan.applied_records(now.timestamp()),
                                    *executor_record(plan, now.timestamp(), sources or None)))
    if measured_restart(result):
        state = state.with_restart_time(result.downtime_s)
    Job.objects.filter(pk=job.pk).update(config=config, config_changed_at=now, scaler_state=state_to_dict(state))
    data = {"attempt": applied, "path": str(result.path), "downtime_s": downtime_s}
    how = (Reason(AuditReason.CONFIG_APPLIED_REPLAYED, {**data, "answered_by": attempt}) if replayed
           else Reason(AuditReason.CONFIG_APPLIED, data))
    audit(job=job, proposal=proposal, actor=Actor.SYSTEM, action=AuditAction.CONFIG_CHANGED, before=before,
          after=config, reason=how)
    transition(proposal=proposal, target=Status.SUCCEEDED, actor=Actor.SYSTEM,
               reason=Reason(AuditReason.ATTEMPT_SUCCEEDED, {"attempt": applied}))
    if proposal.kind == Proposal.Kind.ROLLBACK and proposal.rollback_of_id:
        transition(proposal=Proposal.objects.get(pk=proposal.rollback_of_id), target=Status.ROLLED_BACK,
                   actor=Actor.SYSTEM, reason=Reason(AuditReason.RESTORED_BY, {"proposal": proposal.pk}))


def _record_failure(execution: Execution, attempt: int, result: RescaleResult, entry: AttemptEntry,
                    now: datetime) -> None:
    """sent → waiting_retry (the back-off allows another attempt), else sent → done (failed) and
    the job rolls back."""
    proposal, job = execution.proposal, execution.proposal.job
    earlier = execution.attempt_entries
    failures = [e for e in earlier if e.status in (AttemptOutcome.FAILED, AttemptOutcome.UNANSWERED)] + [entry]
    failure_times = [e.finished_at.timestamp() for e in failures]
    code = result.code
    if code is not None and not code.retryable:  # refused for what it is: the same command is refused again
        decision = RetryDecision(None, RetryCode.REFUSED, {"failure": str(code)})
    else:
        decision = next_retry(_restart_strategy(job.policy), failure_times, now.timestamp())
    entry = replace(entry, retry=decision)
    retry = Reason(decision.code, decision.data).as_json()
    no_answer = entry.status is AttemptOutcome.UNANSWERED
    action = AuditAction.ATTEMPT_UNANSWERED if no_answer else AuditAction.ATTEMPT_FAILED
    failed = Reason(AuditReason.ATTEMPT_UNANSWERED, {"attempt": attempt, "retry": retry}) if no_answer else \
        Reason(AuditReason.ATTEMPT_FAILED, {"error": entry.error, "retry": retry})
    log = entries_to_json([*earlier, entry])
    if decision.retry:
        next_at = now + timedelta(seconds=decision.delay_s)
        if not attempt_transition(execution_id=execution.pk, attempts=attempt, target=AttemptState.WAITING_RETRY,
                                  next_attempt_at=next_at, error=entry.error, attempt_log=log,
                                  lease_expires_at=next_at + timedelta(seconds=lease_s())):
            return
        audit(job=job, proposal=proposal, actor=Actor.SYSTEM, action=action,
              after={"attempt": attempt, "retry_in_s": decision.delay_s}, reason=failed)
        dispatch.enqueue_attempt(proposal.pk, attempt + 1, countdown_s=decision.delay_s)
        return
    if not attempt_transition(execution_id=execution.pk, attempts=attempt, target=AttemptState.DONE,
                              status=ExecutionStatus.FAILED, path=str(result.path), finished_at=now,
                              error=entry.error, result=result_json(result), lease_expires_at=None,
                              attempt_log=log):
        return
    audit(job=job, proposal=proposal, actor=Actor.SYSTEM, action=action,
          after={"attempt": attempt, "retry_in_s": None}, reason=failed)
    transition(proposal=proposal, target=Status.FAILED, actor=Actor.SYSTEM,
               reason=Reason(AuditReason.ATTEMPTS_FAILED, {"attempts": attempt, "error": entry.error}))
    proposal.refresh_from_db()
    if proposal.kind == Proposal.Kind.SCALE:
        start_rollback(proposal=proposal, config=last_good_config(job=job, before=proposal), actor=Actor.SYSTEM,
                       reason=Reason(AuditReason.EXECUTION_FAILED, {"attempts": attempt, "error": entry.error}))
    elif proposal.rollback_of_id:
        original = Proposal.objects.get(pk=proposal.rollback_of_id)
        transition(proposal=original, target=Status.FAILED, source=(Status.ROLLING_BACK,), actor=Actor.SYSTEM,
                   reason=Reason(AuditReason.ROLLBACK_FAILED, {"proposal": proposal.pk, "error": entry.error}))
        Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN,
                                             last_error=f"rollback failed: {entry.error}; needs a person")
