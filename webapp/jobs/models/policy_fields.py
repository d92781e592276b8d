"""Django fields of a job's policy, built from the one option table (``scaling.policy.options.OPTIONS``):
the default, help text, bounds (as validators) and choices of each field are the table's."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from scaling.policy.option_types import Kind, Option, number_text
from scaling.policy.options import OPTION


def help_text(option: Option) -> str:
    """The field's help: the Flink key it mirrors, what it does, its bounds and unit."""
    text = f"{option.flink_key}: {option.help}" if option.flink_key else option.help
    if option.bounds is not None:
        low, high = option.bounds
        unit = f" {option.unit}" if option.unit and option.unit not in ("share", "factor", "ratio") else ""
        when = f", checked when {option.enabled_by} is on" if option.enabled_by else ""
        text += f" From {number_text(low)} to {number_text(high)}{unit}{when}."
    return text


def choices_enum(name: str) -> type[models.TextChoices]:
    """The ``TextChoices`` of a choice option, members named after the values (``fixed-delay`` →
    ``FIXED_DELAY``)."""
    option = OPTION[name]
    return models.TextChoices(name.title().replace("_", ""),
                              [(value.upper().replace("-", "_"), (value, label)) for value, label in option.choices])


def option_field(name: str) -> models.Field:
    """The model field of option ``name``. A bounded option gets Min/Max validators, unless its
    bounds hold only while a switch is on (``JobPolicy.clean`` checks those with the switch)."""
    option = OPTION[name]
    validators = []
    if option.bounds is not None and option.enabled_by is None:
        validators = [MinValueValidator(option.bounds[0]), MaxValueValidator(option.bounds[1])]
    common = {"help_text": help_text(option), "validators": validators}
    nullable = {"null": True, "blank": True} if option.nullable else {}
    if option.kind == Kind.NUMBER:
        return models.FloatField(default=option.default, **nullable, **common)
    if option.kind == Kind.INTEGER:
        return models.PositiveIntegerField(default=option.default, **common)
    if option.kind == Kind.SWITCH:
        return models.BooleanField(default=option.default, **common)
    if option.kind == Kind.CHOICE:
        return models.CharField(max_length=20, choices=option.choices, default=option.default, **nullable, **common)
    if option.kind == Kind.NAME:
        return models.CharField(max_length=200, default=option.default, **common)
    return models.JSONField(default=list, blank=True, **common)
