"""Template filters for knob configurations (any pipeline's knobs, no demo names)."""

from django import template

register = template.Library()


@register.filter
def knob_changes(proposal) -> str:
    """``"cores 1 → 3, enrich_partitions 1 → 3"``: the knobs a proposal changes, or ``"no change"``."""
    current, proposed = proposal.current_config or {}, proposal.proposed_config or {}
    changes = [f"{knob} {current.get(knob, '–')} → {value}" for knob, value in proposed.items()
               if current.get(knob) != value]
    return ", ".join(changes) or "no change"


@register.filter
def knob_undo(proposal) -> str:
    """``"cores 2 → 1"``: what rolling ``proposal`` back changes (its changes, reversed)."""
    current, proposed = proposal.current_config or {}, proposal.proposed_config or {}
    changes = [f"{knob} {value} → {current.get(knob, '–')}" for knob, value in proposed.items()
               if current.get(knob) != value]
    return ", ".join(changes) or "no change"


@register.filter
def revision_changes(revision: dict, proposal) -> str:
    """The knobs an earlier ``revision`` (``Proposal.revisions`` item) changed against the proposal's
    current configuration, like :func:`knob_changes`."""
    current, proposed = proposal.current_config or {}, (revision or {}).get("proposed_config") or {}
    changes = [f"{knob} {current.get(knob, '–')} → {value}" for knob, value in proposed.items()
               if current.get(knob) != value]
    return ", ".join(changes) or "no change"
