"""Proposals (ARCHITECTURE.md "Proposal lifecycle"), their executions and the audit trail."""

from __future__ import annotations

import json
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import models

from sparkclient.contract.messages import RescalePath, RescaleResult
from webapp.jobs.models import Evaluation, Job
from webapp.jobs.plans import StoredPlanMixin
from webapp.proposals import lifecycle
from webapp.proposals.attempts import AttemptEntry, entries_from_json
from webapp.proposals.codes import ACTION_COLOURS, POLICY_WAITS, AuditAction
from webapp.proposals.reason_text import reason_text

#: ``Execution.path``: how the runner applied the rescale (``sparkclient.contract.messages.RescalePath``);
#: empty while it runs.
ExecutionPath = models.TextChoices("ExecutionPath", [(p.name, (p.value, p.value)) for p in RescalePath])

_REASON_HELP = ('{"code": ..., "data": {...}} (webapp.proposals.codes; the text is '
                'webapp.proposals.reason_text); {} for none.')


class Proposal(StoredPlanMixin, models.Model):
    """A proposed new configuration for a job. Every status change is one conditional UPDATE
    in ``webapp.proposals.lifecycle`` (statuses, colours, the transition table). ``plan`` is the
    evaluation's ``JobPlan.to_json`` (read back as ``job_plan``; empty for a rollback), ``reasons``
    its reasons (``reason_values``)."""

    Status = lifecycle.ProposalStatus
    #: Display colour per status (``lifecycle.COLOURS``).
    COLOURS = lifecycle.COLOURS
    IN_FLIGHT = lifecycle.IN_FLIGHT

    class Kind(models.TextChoices):
        SCALE = "scale", "scale (from an evaluation)"
        ROLLBACK = "rollback", "rollback (restores an earlier configuration)"

    class Verification(models.TextChoices):
        NONE = "", "not verified yet"
        VERIFIED = "verified", "verified"
        INEFFECTIVE = "ineffective", "ineffective"
        INCONCLUSIVE = "inconclusive", "inconclusive"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="proposals")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SCALE)
    rollback_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="rollbacks", help_text="The proposal this rollback undoes.")
    evaluation = models.ForeignKey(Evaluation, on_delete=models.SET_NULL, null=True, related_name="proposals")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    current_config = models.JSONField(default=dict)
    proposed_config = models.JSONField(default=dict)
    reasons = models.JSONField(default=list)
    plan = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    comment = models.TextField(blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="A pending proposal expires then.")
    hold_reason = models.JSONField(default=dict, blank=True,
                                   help_text="auto mode: why the policy did not approve it (a HoldCode or the "
                                             "GuardrailCode it breaks), so it waits for a person. " + _REASON_HELP)
    waiting = models.JSONField(default=dict, blank=True,
                               help_text="approved: why its execution waits for a slot on its Spark cluster (a "
                                         "ThrottleCode; webapp.loop.throttle); cleared when it starts. " + _REASON_HELP)
    verification = models.CharField(max_length=20, choices=Verification.choices, default=Verification.NONE,
                                    blank=True)
    verification_detail = models.JSONField(default=dict, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    revision = models.PositiveIntegerField(
        default=1, help_text="Revision of a pending proposal: revised in place when the recommendation changes "
                             "materially (JobPolicy.revision_min_change). An approval names the revision it approves.")
    revisions = models.JSONField(
        default=list, blank=True,
        help_text="Earlier revisions, oldest first: revision, evaluation, proposed_config, reasons, prediction, at.")
    prediction = models.JSONField(
        default=dict, blank=True,
        help_text="Frozen when proposed (and at each revision): what the approver is shown (capacity, utilization, "
                  "batch ratio, catch-up time, expected downtime) and the inputs they came from.")
    withdrawal = models.JSONField(
        default=dict, blank=True,
        help_text="Why a pending proposal was withdrawn: {reason: WithdrawReason, evaluations, ...}.")
    unsupported_by = models.JSONField(
        default=list, blank=True,
        help_text="The consecutive evaluations since the last supporting one that did not support this pending "
                  "proposal: [{evaluation, direction}].")

    class Meta:
        ordering = ["-created_at"]
        permissions = [("decide_proposal", "Can approve, reject and roll back proposals")]
        constraints = [models.UniqueConstraint(
            fields=["job"], condition=models.Q(status__in=["approved", "executing"]),
            name="one_execution_in_flight_per_job",
            violation_error_message="another proposal of this job is approved or executing")]

    def __str__(self) -> str:
        return f"proposal {self.pk} for {self.job} ({self.status})"

    @property
    def colour(self) -> str:
        return self.COLOURS.get(self.status, "#6b7280")

    @property
    def can_roll_back(self) -> bool:
        """Whether the dashboard offers to roll it back (history, proposal and job pages): a scale
        proposal whose execution succeeded. A rollback is not rolled back in turn."""
        return self.status == self.Status.SUCCEEDED and self.kind == self.Kind.SCALE

    @property
    def hold_text(self) -> str:
        """Why auto mode held it for a person, in words (``""`` when not held)."""
        return reason_text(self.hold_reason)

    @property
    def hold_for_person(self) -> bool:
        """Whether its hold waits for a person (else auto mode itself waits, ``codes.POLICY_WAITS``)."""
        return (self.hold_reason or {}).get("code") not in POLICY_WAITS

    @property
    def waiting_text(self) -> str:
        """Why its execution waits for a cluster slot, in words (``""`` when it does not)."""
        return reason_text(self.waiting)


class Execution(models.Model):
    """The one execution of an approved proposal (at most one per proposal)."""

    Status = lifecycle.ExecutionStatus
    AttemptState = lifecycle.AttemptState

    proposal = models.OneToOneField(Proposal, on_delete=models.CASCADE, related_name="execution")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    Path = ExecutionPath

    path = models.CharField(max_length=30, blank=True, choices=ExecutionPath.choices,
                            help_text="How the runner applied it (sparkclient.contract.messages.RescalePath); "
                                      "empty while it runs.")
    downtime_s = models.FloatField(null=True, blank=True,
                                   help_text="Seconds from the stop command to the new query's first batch (runner).")
    pause_s = models.FloatField(null=True, blank=True,
                                help_text="Seconds from the old query's last batch end to the new query's first "
                                          "batch start (0 for executors changed in place).")
    added_lag_s = models.FloatField(null=True, blank=True,
                                    help_text="Peak lag during the rescale minus the steady lag before it, seconds "
                                              "(scaling.forecast.rescale_cost).")
    catch_up_s = models.FloatField(null=True, blank=True,
                                   help_text="Seconds from the rescale until the backlog was back to its level "
                                             "before it; empty until it is (scaling.forecast.rescale_cost).")
    time_to_effect_s = models.FloatField(
        null=True, blank=True, help_text="Seconds from the approval to the first batch on the new configuration "
                                         "(scaling.forecast.rescale_cost.measured_time_to_effect_s); empty when "
                                         "nothing restarted or the runner did not report its first batch.")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict)
    attempts = models.PositiveIntegerField(default=0, help_text="Attempts claimed so far.")
    applied_attempt = models.PositiveIntegerField(
        null=True, blank=True, help_text="The attempt whose command the runner applied (path, pause and downtime are "
                                         "its); earlier than the last one when a later attempt was answered with "
                                         "its apply (a replay of its idempotency key).")
    attempt_state = models.CharField(max_length=20, choices=AttemptState.choices, default=AttemptState.PENDING)
    attempt_log = models.JSONField(default=list, help_text="Per attempt: id, times, outcome, back-off.")
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                            help_text="Past this, the reconcile beat takes the execution over.")
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    @property
    def rescale_result(self) -> RescaleResult | None:
        """The runner's answer recorded for this execution (``result``, the control protocol's JSON),
        None while none is. Raises ``sparkclient.contract.messages.ProtocolError`` when the stored JSON is not one."""
        return RescaleResult.from_json(json.dumps(self.result)) if self.result else None

    @property
    def attempt_entries(self) -> tuple[AttemptEntry, ...]:
        """The attempt log read back (:func:`webapp.proposals.attempts.entries_from_json`), oldest first."""
        return entries_from_json(self.attempt_log)

    def exec_id(self, attempt: int | None = None) -> str:
        """The control-channel command id of an attempt (the current one by default)."""
        return f"proposal-{self.proposal_id}-attempt-{attempt or self.attempts}"

    def attempt_of(self, command_id: str) -> int | None:
        """The attempt whose command id is ``command_id``, or None when none of this execution's is."""
        return next((n for n in range(1, self.attempts + 1) if self.exec_id(n) == command_id), None)

    @property
    def idempotency_key(self) -> str:
        """The key every attempt's command carries (``RescaleCommand.idempotency_key``): the proposal,
        its revision and this execution's start (UTC, microseconds), so a rescale keeps its key across
        attempts and no other rescale shares it, even after the database was reset."""
        started = self.started_at.astimezone(dt_timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        return f"proposal-{self.proposal_id}-revision-{self.proposal.revision}-execution-{started}"


def result_json(result: RescaleResult) -> dict:
    """A runner's answer as ``Execution.result`` stores it: :meth:`RescaleResult.to_json` as an object."""
    return json.loads(result.to_json())


class AuditEvent(models.Model):
    """Append-only record of every transition and configuration change (NetBox ObjectChange)."""

    Action = AuditAction

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="audit_events")
    proposal = models.ForeignKey(Proposal, on_delete=models.SET_NULL, null=True, blank=True,
                                 related_name="audit_events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+", help_text="The person who acted; empty for the system and "
                                                               "the policy.")
    actor_name = models.CharField(max_length=150, help_text='Who acted, as shown: the username, "policy:<name>" '
                                                            'or "system[:<part>]" (webapp.proposals.codes.Actor).')
    action = models.CharField(max_length=50, choices=AuditAction.choices)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    reason = models.JSONField(default=dict, blank=True, help_text=_REASON_HELP)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "at"])]

    @property
    def reason_text(self) -> str:
        """The reason in words (``webapp.proposals.reason_text``)."""
        return reason_text(self.reason)

    @property
    def colour(self) -> str:
        return ACTION_COLOURS.get(self.action, "#6b7280")
