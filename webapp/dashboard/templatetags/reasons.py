"""Template filters for a plan's reasons: the words come from ``scaling.words.reason_text`` only."""

from django import template

from scaling.values.reasons import Reason
from scaling.words.reason_text import MEMORY_KIND_TEXT
from scaling.words.reason_text import reason_text as words

register = template.Library()


@register.filter
def reason_text(reason: Reason) -> str:
    """A plan reason (``scaling.values.reasons.Reason``) in words (:func:`scaling.words.reason_text.reason_text`)."""
    return words(reason)


@register.filter
def memory_kind(kind: str) -> str:
    """What a memory kind is, in words (``scaling.words.reason_text.MEMORY_KIND_TEXT``)."""
    return MEMORY_KIND_TEXT[str(kind)][0]
