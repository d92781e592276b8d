"""An execution's figures in templates, worded once (:mod:`webapp.dashboard.numbers`):
``{% load execution_figures %}`` then ``{{ execution|catch_up }}`` (``catch_up_short`` in a table),
``{{ execution|added_lag }}``, ``{{ execution.path|path_text }}``, ``{{ seconds|duration }}``."""

from __future__ import annotations

from django import template

from webapp.dashboard import numbers
from webapp.proposals import reason_text

register = template.Library()


@register.filter
def catch_up(execution) -> str:
    """The execution's one catch-up with its origin (``numbers.catch_up``)."""
    return numbers.catch_up(execution).text


@register.filter
def catch_up_short(execution) -> str:
    """The same catch-up for a table cell."""
    return numbers.catch_up(execution).short


@register.filter
def added_lag(execution) -> str:
    return numbers.added_lag(execution)


@register.filter
def path_text(path) -> str:
    return reason_text.path_text(path)


@register.filter
def duration(seconds) -> str:
    return numbers.duration(seconds if isinstance(seconds, (int, float)) else None)
