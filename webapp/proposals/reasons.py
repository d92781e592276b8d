"""Structured reasons of the live loop: why a pending proposal was withdrawn, and why a ``scale``
evaluation did not become a proposal. Each is an enum with its data in a dict; the text an operator
reads is rendered from them in ``webapp.proposals.reason_text``, and nothing parses it back.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["WithdrawReason"]


class WithdrawReason(StrEnum):
    """Why a pending proposal was withdrawn (``Proposal.withdrawal["reason"]``)."""

    INSIDE_BAND = "inside_band"  # N evaluations in a row found the load inside the utilization band
    OPPOSITE = "opposite_direction"  # N evaluations in a row pointed the other way
    NOT_SUPPORTED = "not_supported"  # N in a row, some inside the band and some pointing the other way
    CONFIG_CHANGED = "config_changed"  # the running configuration changed underneath it
    KNOB_PINNED = "knob_pinned"  # it changes a knob the checkpoint now pins: the runner would refuse it
