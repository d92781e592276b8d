"""Audit events of every ``AuditAction``, with the ``before``, ``after`` and reason each writer of the
web app stores (the writer is named beside each), for the history page's tests, its benchmark and
its screenshots."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from scaling.forecast.prediction import VerdictReason
from scaling.values.reasons import PlanReason
from scaling.values.reasons import Reason as PlanReasonValue
from tests.webapp.factories import reason_json
from webapp.jobs.models import Job
from webapp.jobs.plans import reasons_json
from webapp.proposals.codes import Actor, AuditAction, AuditReason, GuardrailCode, RetryCode, ThrottleCode
from webapp.proposals.models import AuditEvent
from webapp.proposals.reasons import WithdrawReason

#: A verification's detail as ``webapp.loop.verify.proposal_verify`` stores it.
VERIFICATION_DETAIL = {
    "batches": 14, "arrival_before_per_s": 912.345, "arrival_after_per_s": 905.118, "backlog_slope_per_s": -31.7,
    "latest_backlog": 1200,
    "vertices": [{"vertex_id": "v0", "predicted_tpr": 9845.017, "realized_tpr": 9712.4, "ratio": 0.987, "busy_s": 3.2},
                 {"vertex_id": "v1", "predicted_tpr": 1200.5, "realized_tpr": 1150.25, "ratio": 0.958,
                  "busy_s": 21.75}],
    "reason": "within-tolerance", "capacity_ratio": 0.962,
    "realized": {"capacity_per_s": 2410.5, "utilization": 0.4123, "busy_share": 0.52, "batch_ratio": 0.712,
                 "catch_up_s": None, "downtime_s": 12.345, "window_s": 90.0},
}


def event_specs(job: Job, proposal_id: int | None, user) -> list[dict]:
    """One ``AuditEvent`` field set per ``AuditAction`` (several for some), as the web app writes them."""
    config = dict(job.config)
    scaled = {**config, "cores": config.get("cores", 1) + 1, "enrich_partitions": 4}
    policy = Actor.policy("ds2")
    block = {"proposal": proposal_id, "knobs": ["cores", "enrich_partitions"], "since": timezone.now().isoformat(),
             "reason": reason_json(VerdictReason.RATE_SHORT, capacity_ratio=0.41,
                               short=[{"vertex_id": "v1", "realized_tpr": 500.123, "predicted_tpr": 1200.5}])}
    above = {"load": 1.59, "low": 0.4, "high": 1.0, "need": 1.59, "cores": 1, "overhead": 0.1}
    plan = reasons_json([PlanReasonValue(PlanReason.LOAD_ABOVE_BAND, data=above)])
    withdrawal = {"reason": str(WithdrawReason.INSIDE_BAND), "evaluations": [11, 12, 13]}
    retry = reason_json(RetryCode.RETRY, strategy="exponential-delay", retry=1, attempts=3, delay_s=10.0)
    spent = reason_json(RetryCode.RETRIES_SPENT, strategy="exponential-delay", attempts=3)
    return [  # writer: webapp.proposals.services.proposal_open
        {"actor_name": Actor.SYSTEM, "action": AuditAction.PROPOSED, "before": config,
         "after": {**scaled, "revision": 1}, "reason": reason_json(AuditReason.PLAN_REASONS, reasons=plan)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.REVISED,  # webapp.loop.propose._revise
         "before": {**scaled, "revision": 1}, "after": {**scaled, "cores": scaled["cores"] + 1, "revision": 2},
         "reason": reason_json(AuditReason.RECOMMENDATION_CHANGED, revision=2, evaluation=7, min_change=0.3)},
        {"actor_name": policy, "action": AuditAction.APPROVED, "before": {"status": "pending"},  # lifecycle.transition
         "after": {"status": "approved"}, "reason": reason_json(AuditReason.INSIDE_GUARDRAILS)},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.APPROVED,
         "before": {"status": "pending"}, "after": {"status": "approved", "revision": 2}, "reason": {}},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.REJECTED,
         "before": {"status": "pending"}, "after": {"status": "rejected"},
         "reason": reason_json(AuditReason.COMMENT, text="not during the sale")},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.SUPERSEDED, "before": {"status": "pending"},
         "after": {"status": "superseded"}, "reason": reason_json(AuditReason.SUPERSEDED_BY, proposal=proposal_id)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.EXPIRED, "before": {"status": "pending"},
         "after": {"status": "expired"},
         "reason": reason_json(AuditReason.NO_DECISION_IN_TIME, expires_at=timezone.now().isoformat())},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.WITHDRAWN,  # webapp.loop.propose._withdraw
         "before": {"status": "pending"}, "after": {"status": "withdrawn", "withdrawal": withdrawal},
         "reason": reason_json(WithdrawReason.INSIDE_BAND, evaluations=[11, 12, 13])},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.EXECUTION_THROTTLED,  # webapp.loop.throttle.hold
         "before": {"waiting": None}, "after": {"waiting": ThrottleCode.CLUSTER_BUSY.value},
         "reason": reason_json(ThrottleCode.CLUSTER_BUSY, cluster="local@host", in_flight=[7], limit=1,
                           cooldown_s=30.0, last_finished_at=None, free_at=None)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.EXECUTING, "before": {"status": "approved"},
         "after": {"status": "executing"}, "reason": reason_json(AuditReason.EXECUTION_STARTED, kind="scale")},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.ATTEMPT_STARTED,  # webapp.loop.execute
         "after": {"attempt": 1, "exec_id": f"proposal-{proposal_id}-attempt-1", "config": scaled},
         "reason": reason_json(AuditReason.ATTEMPT_SENT, attempt=1, job=job.name)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.ATTEMPT_FAILED, "after": {"attempt": 1, "retry_in_s": 10.0},
         "reason": reason_json(AuditReason.ATTEMPT_FAILED, error="the runner timed out", retry=retry)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.ATTEMPT_UNANSWERED,
         "after": {"attempt": 3, "retry_in_s": None},
         "reason": reason_json(AuditReason.ATTEMPT_UNANSWERED, attempt=3, retry=spent)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.LATE_ANSWER, "after": {"attempt": 1, "path": "in-process"},
         "reason": reason_json(AuditReason.LATE_SUCCESS, attempt=1)},
        {"actor_name": Actor.RECONCILE, "action": AuditAction.RECONCILED,  # webapp.loop.reconcile
         "before": {"attempt": 1, "attempt_state": "sent"},
         "reason": reason_json(AuditReason.LEASE_NO_ANSWER, attempt=1, lease_s=300.0)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.CONFIG_CHANGED, "before": config, "after": scaled,
         "reason": reason_json(AuditReason.CONFIG_APPLIED, attempt=1, path="driver-restart", downtime_s=12.345)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.CONFIG_CHANGED, "before": scaled, "after": config,
         "reason": reason_json(AuditReason.CONFIG_APPLIED_REPLAYED, attempt=1, path="none", downtime_s=None,
                           answered_by=2)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.SUCCEEDED, "before": {"status": "executing"},
         "after": {"status": "succeeded"}, "reason": reason_json(AuditReason.ATTEMPT_SUCCEEDED, attempt=1)},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.FAILED, "before": {"status": "executing"},
         "after": {"status": "failed"},
         "reason": reason_json(AuditReason.ATTEMPTS_FAILED, attempts=3, error="the runner timed out")},
        {"actor_name": Actor.VERIFICATION, "action": AuditAction.VERIFICATION_VERIFIED,  # webapp.loop.verify
         "after": VERIFICATION_DETAIL,
         "reason": reason_json(VerdictReason.WITHIN_TOLERANCE, capacity_ratio=0.962, tolerance=0.25, slope=-31.7)},
        {"actor_name": Actor.VERIFICATION, "action": AuditAction.VERIFICATION_INEFFECTIVE,
         "after": {**VERIFICATION_DETAIL, "reason": "rate-short", "capacity_ratio": 0.41}, "reason": block["reason"]},
        {"actor_name": Actor.VERIFICATION, "action": AuditAction.VERIFICATION_INCONCLUSIVE, "after": {"batches": 0},
         "reason": reason_json(VerdictReason.NO_BATCHES)},
        {"actor_name": Actor.VERIFICATION, "action": AuditAction.SCALE_UP_BLOCKED,  # webapp.proposals.holds
         "before": {}, "after": block,
         "reason": reason_json(AuditReason.INEFFECTIVE_SCALE_UP, proposal=proposal_id, knobs=block["knobs"],
                           verdict=block["reason"])},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.SCALE_UP_BLOCK_CLEARED,
         "before": block, "after": {}, "reason": reason_json(AuditReason.CLEARED_BY, actor=user.get_username())},
        {"actor_name": policy, "action": AuditAction.AUTO_APPROVE_HELD,  # webapp.loop.propose
         "reason": reason_json(GuardrailCode.MAX_CHANGE_FACTOR, knob="cores", old=1, new=4, factor=4.0, max=2.0)},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.ROLLING_BACK,
         "before": {"status": "succeeded"}, "after": {"status": "rolling_back"},
         "reason": reason_json(AuditReason.ROLLED_BACK_BY, actor=user.get_username())},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.AUTO_APPROVE_SUSPENDED,  # webapp.proposals.rollback
         "before": {"auto_approve_suspended": False}, "after": {"auto_approve_suspended": True},
         "reason": reason_json(AuditReason.ROLLBACK_OF, proposal=proposal_id,
                           cause=reason_json(AuditReason.ROLLED_BACK_BY, actor=user.get_username()))},
        {"actor_name": Actor.SYSTEM, "action": AuditAction.ROLLED_BACK, "before": {"status": "rolling_back"},
         "after": {"status": "rolled_back"}, "reason": reason_json(AuditReason.RESTORED_BY, proposal=proposal_id)},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.AUTO_APPROVE_RESUMED,
         "before": {"auto_approve_suspended": True, "reason": f"rollback of proposal {proposal_id}"},
         "after": {"auto_approve_suspended": False}, "reason": reason_json(AuditReason.RESUMED_BY_PERSON)},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.JOB_CHANGED,  # jobs.services
         "before": {"topic": "nexmark", "spark_ui_url": "", "knobs": job.knobs},
         "after": {"topic": "nexmark-bids", "spark_ui_url": "http://spark-driver:4040",
                   "knobs": [{**k, "max": k["max"] * 2} for k in job.knobs]},
         "reason": reason_json(AuditReason.REGISTRATION_EDITED)},
        {"actor_user": user, "actor_name": user.get_username(), "action": AuditAction.POLICY_CHANGED,
         "before": {"mode": "manual", "max_cores": 8, "utilization_target": 0.7, "catch_up_duration_s": 120.0,
                    "utilization_min": None, "excluded_periods": [], "effectiveness_detection_enabled": True},
         "after": {"mode": "auto", "max_cores": 6, "utilization_target": 0.65, "catch_up_duration_s": 300.0,
                   "utilization_min": 0.4, "excluded_periods": ["0 9 * * 1-5 for 8h"],
                   "effectiveness_detection_enabled": False},
         "reason": reason_json(AuditReason.POLICY_EDITED)},
    ]


def make_every_event(job: Job, proposal_id: int | None, user, *, count: int | None = None) -> list[AuditEvent]:
    """The events of :func:`event_specs` (``count`` of them, repeating the list, one second apart and
    oldest first; default: each once), bulk-created, with their times set."""
    specs = event_specs(job, proposal_id, user)
    count = len(specs) if count is None else count
    start = timezone.now() - timedelta(seconds=count)
    events = [AuditEvent(job=job, proposal_id=proposal_id, **specs[i % len(specs)]) for i in range(count)]
    made = AuditEvent.objects.bulk_create(events, batch_size=500)
    for i, event in enumerate(made):  # ``at`` is auto_now_add: set it after the insert
        event.at = start + timedelta(seconds=i)
    AuditEvent.objects.bulk_update(made, ["at"], batch_size=500)
    return made
