"""The history page's audit trail as NetBox's change log shows it: each event's fields as field →
before → after with human names and units (a knob table for a configuration, a table of figures
and one of stages for a verification), the actor by name, and the reason rendered from its code
(``webapp.proposals.reason_text``). Nothing reaches the page as a Python repr: None is "—",
booleans "yes"/"no", numbers carry their unit and a rounding fit for reading.

:data:`FIELDS` is the one mapping of stored field names to label and unit; the policy's options take
theirs from ``scaling.policy.options.OPTIONS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.core.paginator import Paginator
from django.utils.dateparse import parse_datetime

from scaling.policy.options import OPTIONS
from webapp.dashboard.present import KnobRow
from webapp.proposals.codes import Actor, AuditAction, ThrottleCode
from webapp.proposals.lifecycle import AttemptState, ProposalStatus
from webapp.proposals.models import AuditEvent, ExecutionPath
from webapp.proposals.reason_text import reason_text, withdrawal_text

#: Events longer than this many field rows show the rest folded.
SHOWN_ROWS = 6
#: A value or reason longer than this many characters is folded behind its first words.
LONG_TEXT = 140


@dataclass(frozen=True)
class Field:
    """How a stored field reads: ``label``; ``unit`` of a number (``s`` a duration, ``share`` a
    percentage, ``rec/s``, ``records``, ``ratio``, or a counted noun such as ``cores``); ``text``
    renders a value that is not a plain number; ``none`` is what an absent value means."""

    label: str
    unit: str = ""
    text: Callable[[object], str] | None = None
    none: str = "—"


def _choice(choices) -> Callable[[object], str]:
    labels = dict(choices.choices)
    return lambda value: str(labels.get(value, value))


def _time(value: object) -> str:
    at = parse_datetime(value) if isinstance(value, str) else value
    return at.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(at, datetime) else value_text("", value)


def _declaration(knob: Mapping) -> str:
    """A knob's declaration (``webapp.jobs.knobs``) without its name: ``sets executors, 1–8, default 1``."""
    return f"sets {knob.get('sets')}, {knob.get('min')}–{knob.get('max')}, default {knob.get('default')}"


def _knob_list(value: object) -> str:
    """A block's knob names, or a registration's knob declarations."""
    if not isinstance(value, list):
        return value_text("", value)
    out = [f"{k.get('name')} ({_declaration(k)})" if isinstance(k, Mapping) else value_text("", k) for k in value]
    return ", ".join(out) or "none"


#: Every stored field the audit trail shows: name → label and unit (the policy's options included).
FIELDS: dict[str, Field] = {
    **{o.name: Field(o.name.removesuffix("_s").replace("_", " "), o.unit) for o in OPTIONS},
    "mode": Field("mode"),
    # proposals and executions
    "status": Field("status", text=_choice(ProposalStatus)),
    "revision": Field("revision"),
    "waiting": Field("waiting for", text=_choice(ThrottleCode), none="nothing"),
    "attempt": Field("attempt"),
    "exec_id": Field("command id"),
    "path": Field("execution path", text=_choice(ExecutionPath)),
    "retry_in_s": Field("next attempt in", "s", none="no further attempt"),
    "attempt_state": Field("attempt state", text=_choice(AttemptState)),
    "withdrawal": Field("withdrawal", text=lambda v: withdrawal_text(v) if isinstance(v, Mapping) else str(v)),
    # the policy's suspension and the ineffective-scale-up block
    "auto_approve_suspended": Field("auto-approval suspended"),
    "auto_approve_suspended_reason": Field("why suspended"),
    "auto_approve_suspended_at": Field("suspended at", text=_time),
    "proposal": Field("proposal", text=lambda v: f"#{v}"),
    "knobs": Field("knobs", text=_knob_list),
    "since": Field("since", text=_time),
    "reason": Field("reason", text=lambda v: reason_text(v) or "—"),
    # the registration
    "topic": Field("topic"),
    "query_name": Field("query name"),
    "spark_ui_url": Field("Spark UI URL"),
    "spark_ui_hosts": Field("Spark UI hosts"),
    "spark_ui_ports": Field("Spark UI ports"),
    # a verification (webapp.loop.verify): measured after the change, and realized against predicted
    "batches": Field("batches measured", "batches"),
    "arrival_before_per_s": Field("arrival rate before the change", "rec/s"),
    "arrival_after_per_s": Field("arrival rate after the change", "rec/s"),
    "backlog_slope_per_s": Field("backlog trend", "rec/s"),
    "latest_backlog": Field("latest backlog", "records"),
    "capacity_ratio": Field("realized / predicted capacity", "share"),
    "capacity_per_s": Field("realized capacity", "rec/s"),
    "utilization": Field("realized utilization at the arrival rate", "share"),
    "busy_share": Field("measured busy share", "share"),
    "batch_ratio": Field("batch ratio R", "ratio"),
    "catch_up_s": Field("catch-up, from the end of the execution", "s", none="not caught up in the window"),
    "downtime_s": Field("measured downtime", "s"),
    "window_s": Field("measured over", "s"),
    "predicted_tpr": Field("predicted rate per busy core", "rec/s"),
    "realized_tpr": Field("realized rate per busy core", "rec/s"),
    "ratio": Field("realized against predicted", "share"),
    "busy_s": Field("busy time", "s"),
}


def label(key: str) -> str:
    """The human name of a stored field (the field's own name when :data:`FIELDS` lacks it)."""
    known = FIELDS.get(key)
    return known.label if known else key.replace("_", " ")


def number(value: float) -> str:
    """A number rounded for reading: integers with thousands separators, floats to 3 significant
    digits at most (``9845.017`` → ``9,845``, ``0.254`` → ``0.25``); ``∞`` for an infinite one."""
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return "∞" if value > 0 else ("−∞" if value < 0 else "—")
    size = abs(value)
    text = f"{value:,.0f}" if size >= 100 else f"{value:,.1f}" if size >= 10 else f"{value:.2f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration(seconds: float) -> str:
    """``4.2 s``, ``95 s``, ``12 min 5 s``, ``2 h 10 min``."""
    if abs(seconds) < 120:
        return f"{number(round(seconds, 1) if abs(seconds) < 10 else round(seconds))} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def measure(value: float, unit: str) -> str:
    """A number in its unit (see :class:`Field`)."""
    if unit == "s":
        return duration(value)
    if unit == "share":
        percent = value * 100
        return f"{percent:.1f} %" if 0 < abs(percent) < 1 else f"{percent:.0f} %"
    if unit == "ratio":
        return f"{value:.2f}"
    if unit in ("", "factor"):
        return number(value)
    if value == 1 and unit.endswith("s") and "/" not in unit:
        unit = unit[:-1]
    return f"{number(value)} {unit}"


def value_text(key: str, value: object) -> str:
    """One stored value of field ``key`` as text: ``—`` (or the field's ``none``) for None, ``yes``/``no``,
    a number in the field's unit, a list joined, an object as its labelled fields; never a repr."""
    known = FIELDS.get(key)
    if value is None or value == "" or value == {}:
        return known.none if known else "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if known is not None and known.text is not None:
        return known.text(value)
    if isinstance(value, (int, float)):
        return measure(value, known.unit if known else "")
    if isinstance(value, list):
        return ", ".join(value_text(key, item) for item in value) or "none"
    if isinstance(value, Mapping):
        return "; ".join(f"{label(k)} {value_text(k, v)}" for k, v in value.items())
    return str(value)


def actor_label(event: AuditEvent) -> str:
    """Who acted, by name: a person's full name (else username), ``the <algorithm> policy`` (it
    proposes, and approves in auto mode), ``system``, ``system (reconciler)``, ``system (verification)``."""
    user = event.actor_user
    if user is not None:
        return user.get_full_name() or user.get_username()
    return actor_name_label(event.actor_name)


def actor_name_label(name: str) -> str:
    """:func:`actor_label` of a stored ``actor_name`` alone (the filter's choices)."""
    algorithm = Actor.algorithm_of(name)
    if algorithm is not None:
        return f"the {algorithm} policy"
    return {Actor.RECONCILE: "system (reconciler)", Actor.VERIFICATION: "system (verification)"}.get(name, name)


@dataclass(frozen=True)
class Row:
    """One field of an event: ``before`` and ``after`` as text (``before`` is ``""`` for an event that
    records values only, e.g. an attempt's number)."""

    key: str
    label: str
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def long(self) -> bool:
        return len(self.before) + len(self.after) > LONG_TEXT


@dataclass(frozen=True)
class StageRow:
    """One stage of a verification: its name and its predicted and realized rates as text."""

    stage: str
    predicted: str
    realized: str
    ratio: str
    busy: str


@dataclass(frozen=True)
class EventView:
    """One audit event as the page shows it. ``knobs``: the knobs it changed (``unchanged``: the others,
    folded), or with ``knob_sent`` the configuration an attempt sent; ``rows`` and ``more_rows``
    (folded): its other fields; ``with_before``: the rows have a before column (else one column headed
    ``value_header``); ``stages``: a
    verification's stages (folded); ``reason``: its reason in words."""

    event: AuditEvent
    actor: str
    reason: str
    knobs: list[KnobRow] = field(default_factory=list)
    unchanged: list[KnobRow] = field(default_factory=list)
    knob_sent: bool = False
    rows: list[Row] = field(default_factory=list)
    more_rows: list[Row] = field(default_factory=list)
    with_before: bool = True
    value_header: str = "Value"
    stages: list[StageRow] = field(default_factory=list)

    @property
    def reason_long(self) -> bool:
        return len(self.reason) > LONG_TEXT

    @property
    def reason_start(self) -> str:
        return self.reason[:LONG_TEXT // 2].rsplit(" ", 1)[0] + " …"


#: Actions whose before and after are configurations (``{knob: value}``, and the revision).
CONFIG_ACTIONS = frozenset({AuditAction.PROPOSED, AuditAction.REVISED, AuditAction.CONFIG_CHANGED})
#: Actions whose after is a verification's detail (``webapp.loop.verify.assess``).
VERIFICATION_ACTIONS = frozenset({AuditAction.VERIFICATION_VERIFIED, AuditAction.VERIFICATION_INEFFECTIVE,
                                  AuditAction.VERIFICATION_INCONCLUSIVE})
#: Detail keys a verification row leaves out: its code (the reason column renders it) and the nested parts.
_VERIFICATION_SKIP = frozenset({"reason", "vertices", "realized"})
#: A verification's figures, the realized against the predicted first (any other key follows).
_VERIFICATION_ORDER = ("capacity_ratio", "capacity_per_s", "utilization", "batch_ratio", "catch_up_s", "downtime_s",
                       "batches", "window_s", "arrival_before_per_s", "arrival_after_per_s", "backlog_slope_per_s",
                       "latest_backlog", "busy_share")
#: Keys an event's reason already says (a withdrawal's reason is its code and data).
_SAID_BY_REASON = frozenset({"withdrawal"})


def _knob_rows(before: Mapping, after: Mapping | None, stages: Mapping, units: Mapping) -> tuple[list, list]:
    """(changed, unchanged) knob rows of a configuration ``before`` → ``after`` (values as text)."""
    keys = list(before) + [k for k in (after or {}) if k not in before]
    rows = [KnobRow(knob=k, stages=stages.get(k, ""), current=value_text(k, before.get(k)), unit=units.get(k, ""),
                    proposed=value_text(k, after.get(k)) if after is not None else None) for k in keys]
    if after is None:
        return rows, []
    return [r for r in rows if r.changed], [r for r in rows if not r.changed]


def _rows(before: Mapping, after: Mapping, keys: Iterable[str] | None = None) -> list[Row]:
    """The fields that differ between ``before`` and ``after`` (every field when ``before`` is empty)."""
    keys = list(keys) if keys is not None else list(before) + [k for k in after if k not in before]
    keys = [k for k in keys if k not in _SAID_BY_REASON]
    rows = [Row(k, label(k), value_text(k, before.get(k)) if before else "", value_text(k, after.get(k)))
            for k in keys]
    return [r for r in rows if r.changed or not before]


def _declaration_rows(before: object, after: object) -> list[Row]:
    """A registration's knob declarations, before → after, one row per knob declared differently."""
    def by_name(value: object) -> dict[str, str]:
        return {str(k.get("name")): _declaration(k) for k in value or () if isinstance(k, Mapping)}

    old, new = by_name(before), by_name(after)
    names = list(old) + [n for n in new if n not in old]
    return [Row("knobs", f"knob {n}", old.get(n, "not declared"), new.get(n, "not declared"))
            for n in names if old.get(n) != new.get(n)]


def _split(view: dict, rows: list[Row]) -> dict:
    return {**view, "rows": rows[:SHOWN_ROWS], "more_rows": rows[SHOWN_ROWS:]}


def _verification(detail: Mapping, names: Mapping[str, str]) -> dict:
    realized = detail.get("realized") if isinstance(detail.get("realized"), Mapping) else {}
    values = {**{k: detail[k] for k in detail if k not in _VERIFICATION_SKIP}, **realized}
    figures = [k for k in _VERIFICATION_ORDER if k in values] + [k for k in values if k not in _VERIFICATION_ORDER]
    stages = [StageRow(stage=names.get(str(v.get("vertex_id")), str(v.get("vertex_id"))),
                       predicted=value_text("predicted_tpr", v.get("predicted_tpr")),
                       realized=value_text("realized_tpr", v.get("realized_tpr")),
                       ratio=value_text("ratio", v.get("ratio")), busy=value_text("busy_s", v.get("busy_s")))
              for v in detail.get("vertices") or () if isinstance(v, Mapping)]
    return {**_split({"with_before": False}, _rows({}, values, figures)), "stages": stages}


def event_view(event: AuditEvent, *, knob_stages: Mapping[str, str], stage_names: Mapping[str, str],
               knob_units: Mapping[str, str] | None = None) -> EventView:
    """How ``event`` reads on the page (see :class:`EventView`). ``knob_stages``: ``{knob: the stages it
    sets}`` (``present.knob_stages``); ``stage_names``: ``{vertex_id: stage name}``; ``knob_units``:
    ``{knob: unit}`` (``present.knob_units``)."""
    before = event.before if isinstance(event.before, Mapping) else {"value": event.before}
    after = event.after if isinstance(event.after, Mapping) else {"value": event.after}
    view: dict = {}
    if event.action in CONFIG_ACTIONS:
        knobs = [k for k in list(before) + list(after) if k != "revision"]
        changed, unchanged = _knob_rows({k: v for k, v in before.items() if k in knobs},
                                        {k: v for k, v in after.items() if k in knobs}, knob_stages, knob_units or {})
        rest = [k for k in after if k not in knobs]
        view = _split({"knobs": changed, "unchanged": unchanged}, _rows(
            {k: before.get(k) for k in rest} if before else {}, {k: after[k] for k in rest}))
    elif event.action in VERIFICATION_ACTIONS:
        view = _verification(after, stage_names)
    elif isinstance(after.get("config"), Mapping):  # an attempt's command: the configuration it sent
        sent, _ = _knob_rows(after["config"], None, knob_stages, knob_units or {})
        rest = {k: v for k, v in after.items() if k != "config"}
        view = _split({"knobs": sent, "knob_sent": True, "with_before": False}, _rows({}, rest))
    elif isinstance(after.get("knobs"), list) and isinstance(before.get("knobs"), list):  # a registration edit
        rest = [k for k in list(before) + [k for k in after if k not in before] if k != "knobs"]
        view = _split({}, _rows({k: before.get(k) for k in rest}, {k: after.get(k) for k in rest}, rest)
                      + _declaration_rows(before["knobs"], after["knobs"]))
    elif before and not after:  # what was there before: a block cleared, an attempt taken over
        view = _split({"with_before": False, "value_header": "Before"}, _rows({}, before))
    else:
        view = _split({"with_before": bool(before)}, _rows(before, after))
    return EventView(event=event, actor=actor_label(event), reason=event.reason_text, **view)


#: Audit events per page of the history page.
PER_PAGE = 50


@dataclass(frozen=True)
class AuditFilter:
    """The audit trail's filter, parsed from the page's GET parameters: an :class:`AuditAction` value
    and an ``actor_name`` (``""``: any). An unknown action filters nothing."""

    action: str = ""
    actor: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> AuditFilter:
        action = str(query.get("action", ""))
        return cls(action=action if action in AuditAction.values else "",
                   actor=str(query.get("actor", ""))[:150])

    def apply(self, events):
        if self.action:
            events = events.filter(action=self.action)
        if self.actor:
            events = events.filter(actor_name=self.actor)
        return events

    @property
    def label(self) -> str:
        """The filter in words: ``approved, by the ds2 policy``."""
        action = AuditAction(self.action).label if self.action else ""
        return ", ".join(p for p in (action, f"by {actor_name_label(self.actor)}" if self.actor else "") if p)

    def query(self) -> dict[str, str]:
        """The GET parameters that select it again (for the page links)."""
        return {k: v for k, v in (("action", self.action), ("actor", self.actor)) if v}


def audit_page(*, job, query: Mapping[str, str], knob_stages: Mapping[str, str], stage_names: Mapping[str, str],
               knob_units: Mapping[str, str] | None = None) -> dict:
    """One page of ``job``'s audit trail, newest first, filtered by ``query`` (``action``, ``actor``,
    ``page``): ``events`` (the Django page), ``event_views``, ``audit_filter``, the filter's choices
    ``action_choices`` (every :class:`AuditAction`) and ``actor_choices`` (the actors of the job's
    events, ``(actor_name, label)``). Reads three queries, whatever the trail's length."""
    audit_filter = AuditFilter.from_query(query)
    events = audit_filter.apply(job.audit_events.select_related("actor_user").order_by("-at", "-id"))
    page = Paginator(events, PER_PAGE).get_page(query.get("page"))
    actors = sorted(job.audit_events.order_by().values_list("actor_name", flat=True).distinct())
    return {"events": page, "audit_filter": audit_filter,
            "event_views": [event_view(e, knob_stages=knob_stages, stage_names=stage_names, knob_units=knob_units)
                            for e in page],
            "action_choices": AuditAction.choices, "actor_choices": [(a, actor_name_label(a)) for a in actors]}
