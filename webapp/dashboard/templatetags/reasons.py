"""Template filters for a plan's reasons: the words come from ``scaling.reason_text`` only."""

from django import template

from scaling.reason_text import MEMORY_KIND_TEXT, reason_text as words
from scaling.reasons import Reason

register = template.Library()


@register.filter
def reason_text(reason: Reason) -> str:
    """A plan reason (``scaling.reasons.Reason``) in words (:func:`scaling.reason_text.reason_text`)."""
    return words(reason)


@register.filter
def memory_kind(kind: str) -> str:
    """What a memory kind is, in words (``scaling.reason_text.MEMORY_KIND_TEXT``)."""
    return MEMORY_KIND_TEXT[str(kind)][0]
