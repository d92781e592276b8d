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
