"""What waits for a person (:class:`ItemKind`, the inbox) and what a person is told
(:class:`NoticeKind`, the notifications), each with its data; the one place both become text.

An inbox item's data (``webapp.inbox.items``) and a notice's data (``webapp.inbox.notify``) are
JSON-ready dicts; the text is rendered here from the kind and the data, never stored. A kind this
version does not know renders as the kind itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.db import models

from webapp.proposals.codes import AuditAction


class ItemKind(models.TextChoices):
    """What waits for a person, in the inbox (``InboxItem.kind``)."""

    PENDING_PROPOSAL = "pending_proposal", "pending proposal"  # data: proposal, revision, waited_s, changes, hold
    INCONCLUSIVE_VERIFICATION = "inconclusive_verification", "inconclusive verification"  # data: proposal, reason
    AUTO_APPROVAL_SUSPENDED = "auto_approval_suspended", "auto-approval suspended"  # data: reason (text)
    SCALE_UP_BLOCKED = "scale_up_blocked", "scale-ups blocked"  # data: knobs, proposal
    JOB_DOWN = "job_down", "job down"  # data: error (text)


class NoticeKind(models.TextChoices):
    """What a notification tells (``NotificationTarget.kinds``)."""

    PROPOSAL_PENDING = "proposal_pending", "a proposal waits for a decision"  # data: proposal, changes, hold
    RESCALE_SUCCEEDED = "rescale_succeeded", "a rescale was executed"  # data: proposal, changes
    RESCALE_FAILED = "rescale_failed", "a rescale failed"  # data: proposal, changes, reason (text)
    ROLLED_BACK = "rolled_back", "a rescale was rolled back"  # data: proposal, changes
    VERIFICATION_INCONCLUSIVE = "verification_inconclusive", "a verification was inconclusive"  # data: proposal, reason
    JOB_DOWN = "job_down", "a job is down"  # data: error (text); down: its coded health reason, when coded


#: The moves of a proposal a notice is derived from (``proposal_moved``'s actions, ``webapp.inbox.receivers``).
#: A pending proposal is told when it is proposed and when auto mode holds it for a person (one notice:
#: same key).
AUDIT_NOTICES: dict[str, NoticeKind] = {
    AuditAction.PROPOSED: NoticeKind.PROPOSAL_PENDING,
    AuditAction.AUTO_APPROVE_HELD: NoticeKind.PROPOSAL_PENDING,
    AuditAction.SUCCEEDED: NoticeKind.RESCALE_SUCCEEDED,
    AuditAction.FAILED: NoticeKind.RESCALE_FAILED,
    AuditAction.ROLLED_BACK: NoticeKind.ROLLED_BACK,
    AuditAction.VERIFICATION_INCONCLUSIVE: NoticeKind.VERIFICATION_INCONCLUSIVE,
}


def duration_text(seconds: float) -> str:
    """``42 s``, ``12 min``, ``5 h``, ``3 d``: a waiting time, rounded down to its largest unit."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def changes_text(changes: Mapping) -> str:
    """``cores 1 → 2, state_partitions 2 → 4`` from ``{knob: [old, new]}``; ``""`` for none."""
    return ", ".join(f"{knob} {pair[0]} → {pair[1]}" for knob, pair in changes.items())


def _with(prefix: str, text: object) -> str:
    return f"{prefix}{text}" if text else ""


_ITEM_TEXT: dict[str, Callable[[Mapping], str]] = {
    ItemKind.PENDING_PROPOSAL: lambda d: (
        f"proposal #{d['proposal']} (revision {d.get('revision', 1)}) has waited "
        f"{duration_text(d.get('waited_s', 0))} for a decision" + _with(": ", changes_text(d.get("changes") or {}))
        + _with("; held: ", d.get("hold"))),
    ItemKind.INCONCLUSIVE_VERIFICATION: lambda d: (
        f"the verification of proposal #{d['proposal']} was inconclusive" + _with(": ", d.get("reason"))),
    ItemKind.AUTO_APPROVAL_SUSPENDED: lambda d: "auto-approval is suspended" + _with(": ", d.get("reason")),
    ItemKind.SCALE_UP_BLOCKED: lambda d: (
        f"scale-ups of {', '.join(d.get('knobs') or ()) or 'its knobs'} are blocked"
        + _with(" since proposal #", d.get("proposal")) + " was verified ineffective"),
    ItemKind.JOB_DOWN: lambda d: "the job is down" + _with(": ", d.get("error")),
}

_NOTICE_TEXT: dict[str, Callable[[Mapping], str]] = {
    NoticeKind.PROPOSAL_PENDING: lambda d: (
        f"proposal #{d['proposal']} waits for a decision" + _with(": ", changes_text(d.get("changes") or {}))
        + _with("; held: ", d.get("hold"))),
    NoticeKind.RESCALE_SUCCEEDED: lambda d: (
        f"proposal #{d['proposal']} was executed" + _with(": ", changes_text(d.get("changes") or {}))),
    NoticeKind.RESCALE_FAILED: lambda d: (
        f"proposal #{d['proposal']} failed" + _with(" (", changes_text(d.get("changes") or {}))
        + (")" if d.get("changes") else "") + _with(": ", d.get("reason"))),
    NoticeKind.ROLLED_BACK: lambda d: (
        f"proposal #{d['proposal']} was rolled back" + _with(" (it changed ", changes_text(d.get("changes") or {}))
        + (")" if d.get("changes") else "")),
    NoticeKind.VERIFICATION_INCONCLUSIVE: lambda d: (
        f"the verification of proposal #{d['proposal']} was inconclusive" + _with(": ", d.get("reason"))),
    NoticeKind.JOB_DOWN: lambda d: "the job is down" + _with(": ", d.get("error")),
}


def item_text(kind: str, data: Mapping) -> str:
    """An inbox item in words (without the job's name, which the page and the API show beside it)."""
    render = _ITEM_TEXT.get(kind)
    return render(data) if render else str(kind)


def notice_text(kind: str, job: str, data: Mapping) -> str:
    """A notification's one-line text: ``[sparkscaler] job <name>: <what happened>``."""
    render = _NOTICE_TEXT.get(kind)
    return f"[sparkscaler] job {job}: {render(data) if render else kind}"


#: Display colour per item kind: templates never hard-code one.
ITEM_COLOURS: dict[str, str] = {
    ItemKind.PENDING_PROPOSAL: "#d97706", ItemKind.INCONCLUSIVE_VERIFICATION: "#6b7280",
    ItemKind.AUTO_APPROVAL_SUSPENDED: "#dc2626", ItemKind.SCALE_UP_BLOCKED: "#dc2626", ItemKind.JOB_DOWN: "#991b1b",
}
