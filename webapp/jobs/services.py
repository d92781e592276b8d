"""Writes for jobs: registration and edits of a job and its policy, audited (HackSoft style:
keyword-only, typed, atomic). Metric collection is ``webapp.loop.collect``; evaluation is
``webapp.loop.evaluate``."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from webapp.jobs.models import Job, JobPolicy
from webapp.jobs.signals import job_edited

logger = logging.getLogger(__name__)

#: Registration fields of ``Job`` that ``job_register`` sets when they are given.
REGISTRATION_FIELDS = ("topic", "query_name", "spark_ui_url", "spark_ui_hosts", "spark_ui_ports", "knobs")


class RegistrationError(ValueError):
    """A registration was refused. ``errors`` maps a field to its messages; the policy's fields are
    under ``"policy"`` as their own mapping. Nothing was saved."""

    def __init__(self, errors: dict) -> None:
        super().__init__("; ".join(f"{field}: {msgs}" for field, msgs in errors.items()))
        self.errors = errors


def _validation_errors(exc) -> dict[str, list[str]]:
    return {field: [str(m) for m in messages] for field, messages in exc.message_dict.items()}


def _unknown_policy_fields(values: dict) -> dict[str, list[str]]:
    """``{field: ["not a policy field"]}`` for each key of ``values`` that a policy may not be given."""
    editable = {f.name for f in JobPolicy._meta.concrete_fields} - {"id", "job"}
    return {str(field): ["not a policy field"] for field in values if field not in editable}


def job_register(*, name: str, topic: str = "", query_name: str = "", config: dict | None = None,
                 knobs: list | None = None, policy: dict | None = None, spark_ui_url: str | None = None,
                 spark_ui_hosts: list | None = None, spark_ui_ports: str | None = None,
                 exists_ok: bool = True) -> Job:
    """Register a job (and its policy), or update the registration of an existing one.

    The one registration path of the admin's add form aside (which runs the same ``clean()``s):
    the API (``POST /api/jobs/``), ``manage.py register_job``, ``make demo`` and the tests.

    Args:
        name: the runner's ``--job`` name (a slug).
        spark_ui_url, spark_ui_hosts, spark_ui_ports: where the Spark UI may be read (fixed URL,
            or discovery rule); see ``webapp.jobs.sparkui``. None keeps the stored value (the
            default rule, this machine's ports 4040-4056, for a new job).
        knobs: the pipeline's knob declarations (``sparkclient.contract.spec.Knob`` dicts, validated by
            ``webapp.jobs.knobs``); None keeps the stored ones. The runner reports them too.
        config: the initial knob values (the runner reports them later).
        policy: ``JobPolicy`` field values; applied to a new policy and to an existing one.
        exists_ok: False refuses a name that is already registered.

    Raises:
        RegistrationError: a field is invalid (same validation as the admin: the models'
            ``full_clean()``), or the name is taken and ``exists_ok`` is False. Nothing is saved.
    """
    given = {"topic": topic or None, "query_name": query_name or None, "spark_ui_url": spark_ui_url,
             "spark_ui_hosts": spark_ui_hosts, "spark_ui_ports": spark_ui_ports, "knobs": knobs}
    given = {k: v for k, v in given.items() if v is not None}
    try:
        with transaction.atomic():
            job = Job.objects.select_for_update().filter(name=name).first()
            created = job is None
            if not created and not exists_ok:
                raise RegistrationError({"name": [f"a job named {name!r} is already registered; edit it with "
                                                  f"PATCH /api/jobs/{job.pk}/"]})
            if created:
                job = Job(name=name, config=config or {})
                if spark_ui_url and spark_ui_hosts is None:
                    job.spark_ui_hosts = []  # a fixed URL alone: no discovery rule besides it
            elif config and not job.config:
                job.config = config
            for field, value in given.items():
                setattr(job, field, value)
            errors: dict = {}
            try:
                job.full_clean(validate_unique=created)
            except ValidationError as exc:
                errors.update(_validation_errors(exc))
            job_policy = None if created else JobPolicy.objects.filter(job=job).first()
            job_policy = job_policy or JobPolicy()
            policy_errors = _unknown_policy_fields(policy or {})
            if not policy_errors:
                for field, value in (policy or {}).items():
                    setattr(job_policy, field, value)
                try:
                    job_policy.full_clean(exclude=["job"])
                except ValidationError as exc:
                    policy_errors.update(_validation_errors(exc))
            if policy_errors:
                errors["policy"] = policy_errors
            if errors:
                raise RegistrationError(errors)
            job.save()
            job_policy.job = job
            job_policy.save()
    except IntegrityError:
        raise RegistrationError({"name": [f"a job named {name!r} is already registered"]}) from None
    return job


def job_update(*, job: Job, changes: dict, actor) -> Job:
    """Edit a registered job's registration fields (``REGISTRATION_FIELDS``), with the admin's
    validation, and record an audit event ``job_changed`` with the changed fields before and after.
    ``actor`` is the user (or a non-human actor's name).

    Raises:
        RegistrationError: a field is invalid, or not a registration field; nothing is saved.
    """
    unknown = [f for f in changes if f not in REGISTRATION_FIELDS]
    if unknown:
        raise RegistrationError({f: ["not a registration field"] for f in unknown})
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        _edit_audited(job, job, changes, clean=lambda: job.full_clean(validate_unique=False), actor=actor,
                      action="job_changed", reason="registration_edited")
    return job


def _edit_audited(job: Job, instance, changes: dict, *, clean, actor, action: str, reason: str) -> None:
    """Set ``changes`` on ``instance``, validate with ``clean`` (the admin's checks), save those
    fields, and record ``action`` in the audit trail with the fields that changed, before and after.

    Raises:
        RegistrationError: ``clean`` refused a value (errors keyed by field); nothing is saved.
    """
    before = {f: getattr(instance, f) for f in changes}
    for field, value in changes.items():
        setattr(instance, field, value)
    try:
        clean()
    except ValidationError as exc:
        raise RegistrationError(_validation_errors(exc)) from None
    instance.save(update_fields=list(changes))
    after = {f: getattr(instance, f) for f in changes}
    changed = [f for f in changes if before[f] != after[f]]
    if changed:
        job_edited.send(sender=type(instance), job=job, actor=actor, action=action,
                        before={f: before[f] for f in changed}, after={f: after[f] for f in changed}, reason=reason)


def job_policy_update(*, job: Job, changes: dict, actor) -> JobPolicy:
    """Edit a job's policy (mode included) with the admin's validation (``JobPolicy.full_clean``:
    the field validators and ``clean()``), and record an audit event ``policy_changed`` with the
    changed fields before and after.

    Raises:
        RegistrationError: a value is invalid or the field is not a policy field (errors keyed by
            field); nothing is saved.
    """
    if errors := _unknown_policy_fields(changes):
        raise RegistrationError(errors)
    with transaction.atomic():
        policy = JobPolicy.objects.select_for_update().get(job=job)
        _edit_audited(job, policy, changes, clean=lambda: policy.full_clean(exclude=["job"]), actor=actor,
                      action="policy_changed", reason="policy_edited")
    return policy
