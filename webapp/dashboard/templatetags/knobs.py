"""Template filters for knob configurations (any pipeline's knobs, no demo names)."""

from datetime import datetime

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()


def changes_text(before: dict | None, after: dict | None) -> str:
    """``"cores 1 → 3, enrich_partitions 1 → 3"``: every knob of ``after`` whose value differs from
    ``before`` (``–`` where ``before`` lacks it), or ``"no change"``."""
    before, after = before or {}, after or {}
    changes = [f"{knob} {before.get(knob, '–')} → {value}" for knob, value in after.items()
               if before.get(knob) != value]
    return ", ".join(changes) or "no change"


@register.filter
def knob_changes(proposal) -> str:
    """The knobs a proposal changes (:func:`changes_text` of its current → proposed configuration)."""
    return changes_text(proposal.current_config, proposal.proposed_config)


@register.filter
def knob_undo(proposal) -> str:
    """``"cores 2 → 1"``: what rolling ``proposal`` back changes (its changes, reversed)."""
    current, proposed = proposal.current_config or {}, proposal.proposed_config or {}
    return changes_text(proposed, {knob: current.get(knob, "–") for knob, value in proposed.items()
                                   if current.get(knob) != value})


@register.filter
def revision_changes(revision: dict, proposal) -> str:
    """The knobs an earlier ``revision`` (``Proposal.revisions`` item) changed against the proposal's
    current configuration, like :func:`knob_changes`."""
    return changes_text(proposal.current_config, (revision or {}).get("proposed_config"))


@register.filter
def iso_datetime(value: object) -> datetime | None:
    """A stored ISO 8601 time (a revision's ``at``, kept in JSON) as a datetime for Django's ``date``
    filter, or None when it is missing or not a time (the cell then shows nothing)."""
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None
