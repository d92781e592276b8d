"""Schemathesis hooks of ``test_api_fuzz`` (``SCHEMATHESIS_HOOKS``): a schema-valid (positive) body of
``POST /api/jobs/``, ``PATCH /api/jobs/{id}/`` or ``PATCH /api/jobs/{id}/policy/`` is made to satisfy
the rules between fields that the operations' descriptions state and OpenAPI 3.0 cannot
(``utilization_min ≤ utilization_target ≤ utilization_max``, ``min_cores ≤ max_cores``, a UI rule
needs a URL or hosts with ports, ...) and, for a registration, the rule across jobs that a name is
not taken yet, before it is sent. Negative cases are left alone, and every
check stays on.

The rules are the server's own: the body is validated by the models' ``clean_fields()`` and
``clean()`` (``Job.clean``: ``webapp.jobs.sparkui.rule_errors`` and the knobs; ``JobPolicy.clean``:
``webapp.jobs.policy_mapping.policy_errors``), and each field they refuse is set to the model's
default until none is refused. The edited fields of a PATCH are sent together with the others of
their group (the whole policy, the whole UI rule), so the result does not depend on what an earlier
case stored."""

from __future__ import annotations

import itertools

import django
import schemathesis
from django.core.exceptions import ValidationError
from schemathesis import GenerationMode

django.setup()

from webapp.jobs.models import Job, JobPolicy  # noqa: E402 - the models load once Django is set up

#: The registration fields a body may carry (``webapp.jobs.services.REGISTRATION_FIELDS``).
UI_FIELDS = ("spark_ui_url", "spark_ui_hosts", "spark_ui_ports")
REGISTRATION_FIELDS = ("topic", "query_name", *UI_FIELDS, "knobs")
#: The policy fields a body may set (the serializer's writable ones).
POLICY_FIELDS = tuple(f.name for f in JobPolicy._meta.concrete_fields
                      if f.editable and f.name not in ("id", "job") and not f.name.startswith("auto_approve_"))


#: A fresh suffix per registered name: a name is unique (``Job.name``), and one already taken is a 400.
_FRESH = itertools.count(1)


def _defaults(model, names) -> dict:
    return {name: model._meta.get_field(name).get_default() for name in names}


def _refused(instance, exclude: list[str]) -> set[str]:
    """The fields the model's own validation refuses (``__all__`` for a rule without one)."""
    try:
        instance.clean_fields(exclude=exclude)
        instance.clean()
    except ValidationError as exc:
        return set(exc.message_dict)
    return set()


def repaired(model, body: dict, names: tuple[str, ...], exclude: list[str]) -> dict:
    """``body`` over the model's defaults of ``names``, with each field the model refuses set to its
    default until none is (the defaults are valid together, so this ends). A rule between fields is
    reported on one of them (or ``__all__``): when that one is already its default, every edited
    field is reset."""
    defaults = _defaults(model, names)
    values = {**defaults, **{k: v for k, v in body.items() if k in names}}
    for _ in range(len(names) + 1):
        refused = _refused(model(**values), exclude)
        if not refused:
            break
        changed = {k for k in values if values[k] != defaults[k]}
        # a refused field that is already its default breaks a rule with others: reset those too
        bad = (refused & changed) if refused <= changed else changed
        values.update({name: defaults[name] for name in bad})
    return values


def _policy(body: dict) -> dict:
    return repaired(JobPolicy, body, POLICY_FIELDS, exclude=["job"])


def _registration(body: dict, *, whole: bool) -> dict:
    """The registration fields of ``body``, repaired; the UI rule sent whole when it is edited."""
    given = [k for k in REGISTRATION_FIELDS if k in body]
    if any(k in body for k in UI_FIELDS):
        given += [k for k in UI_FIELDS if k not in given]
    exclude = [f.name for f in Job._meta.concrete_fields if f.name not in REGISTRATION_FIELDS]
    values = repaired(Job, body, REGISTRATION_FIELDS, exclude=exclude)
    return values if whole else {k: values[k] for k in given}


@schemathesis.hook
def map_case(context, case):
    """Repair the body of a positive case of the three registration and policy operations."""
    meta, body = case.meta, case.body
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE or not isinstance(body, dict):
        return case
    label = f"{case.operation.method.upper()} {case.operation.path}"
    if label == "PATCH /api/jobs/{id}/policy/":
        case.body = _policy(body)
    elif label == "PATCH /api/jobs/{id}/":
        case.body = {**body, **_registration(body, whole=False)}
    elif label == "POST /api/jobs/":
        case.body = {**body, **_registration(body, whole=False)}
        if isinstance(body.get("name"), str):  # schema-valid: a slug of at most 100 characters
            case.body["name"] = f"{body['name'][:90]}-st{next(_FRESH)}"
        if isinstance(body.get("policy"), dict):
            case.body["policy"] = _policy(body["policy"])
    return case
