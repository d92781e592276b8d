"""The knobs a job is registered with: the pipeline contract's declarations, as JSON.

``Job.knobs`` holds a list of :meth:`sparkclient.contract.spec.Knob.to_dict` objects:

    {"name": "enrich_partitions", "default": 4, "min": 1, "max": 64, "sets": "repartition"}

(``description`` optional). :func:`parse_knobs` is the one place the web app validates such a list
(the model's ``clean()``, hence the admin, the API and the CLI), with the contract's own checks:
:meth:`Knob.from_dict` per knob and :func:`sparkclient.contract.spec.check_knob_set` for the set.
"""

from __future__ import annotations

from typing import Any

from sparkclient.contract.spec import Knob, KnobError, check_knob_set


class KnobListError(ValueError):
    """A knob list is invalid; ``errors`` holds one message per problem, each naming the knob."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def parse_knobs(value: Any) -> tuple[Knob, ...]:
    """Parse a registration's knob list (JSON already decoded) into the contract's knobs.

    Returns:
        The knobs, in the order given.

    Raises:
        KnobListError: not a list, an invalid knob (bounds must hold ``1 <= min <= default <= max``
            for a parallelism or executors knob), or an invalid set (duplicate names, two
            executors knobs, ...); every problem is listed, each with the knob's position.
    """
    if not isinstance(value, list):
        raise KnobListError([f"must be a JSON list of knob objects, got {type(value).__name__}"])
    knobs: list[Knob] = []
    errors: list[str] = []
    for i, item in enumerate(value, start=1):
        try:
            knobs.append(Knob.from_dict(item))
        except KnobError as exc:
            errors.append(f"knob {i}: {exc}")
    if not errors:
        try:
            check_knob_set(knobs)
        except KnobError as exc:
            errors.append(str(exc))
    if errors:
        raise KnobListError(errors)
    return tuple(knobs)


def knob_errors(value: Any) -> list[str]:
    """The problems of a knob list (empty when it is valid); see :func:`parse_knobs`."""
    try:
        parse_knobs(value)
    except KnobListError as exc:
        return exc.errors
    return []
