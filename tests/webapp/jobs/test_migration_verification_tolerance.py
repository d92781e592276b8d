"""Migration ``jobs.0021_verification_tolerance_capacity_error``: policies still at the old default
tolerance (0.25, under which a capacity 16.7 % short was "verified") get the new default, 0.1; a
tolerance a person chose stays; going back restores the old default."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tests.webapp.factories import make_job
from webapp.jobs.models import JobPolicy

pytestmark = pytest.mark.django_db

migration = importlib.import_module("webapp.jobs.migrations.0021_verification_tolerance_capacity_error")


def test_the_old_default_becomes_the_new_one_and_a_chosen_tolerance_stays():
    old, chosen = make_job(name="old"), make_job(name="chosen")
    JobPolicy.objects.filter(job=old).update(verification_tolerance=0.25)
    JobPolicy.objects.filter(job=chosen).update(verification_tolerance=0.05)
    migration.to_new_default(apps, None)
    assert JobPolicy.objects.get(job=old).verification_tolerance == 0.1
    assert JobPolicy.objects.get(job=chosen).verification_tolerance == 0.05
    migration.to_old_default(apps, None)
    assert JobPolicy.objects.get(job=old).verification_tolerance == 0.25
    assert JobPolicy.objects.get(job=chosen).verification_tolerance == 0.05


def test_a_new_policy_has_the_new_default():
    assert make_job().policy.verification_tolerance == 0.1
