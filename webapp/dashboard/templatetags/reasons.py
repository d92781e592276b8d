"""Template filters for a plan's reasons: the words come from ``scaling.reason_text`` only."""

from django import template

from scaling.reason_text import reason_text as words
from scaling.reasons import Reason

register = template.Library()


@register.filter
def reason_text(reason: Reason) -> str:
    """A plan reason (``scaling.reasons.Reason``) in words (:func:`scaling.reason_text.reason_text`)."""
    return words(reason)
