"""``manage.py backtest``: replays stored snapshots through a policy."""

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError
from django.utils import timezone

from scaling.values.reasons import PlanReason, Reason
from scaling.words.reason_text import reason_text
from tests.webapp.factories import command_output, make_job, make_snapshots
from webapp.loop.management.commands.backtest import parse_duration_s

pytestmark = pytest.mark.django_db


def test_backtest_reports_what_ds2_would_have_proposed_and_when():
    job = make_job(metric_window_s=45.0)
    make_snapshots(job, count=12, window_s=15.0, end=timezone.now() - timedelta(minutes=1))
    decisions = json.loads(command_output("backtest", "--job", str(job.pk), "--policy", "ds2", "--since", "1h",
                                          "--json"))
    # The enrich stage is saturated on 1 core: every full window proposes more cores and partitions.
    assert decisions and all(d["proposed"] and d["decision"] == "scale" for d in decisions)
    assert len(decisions) == 12 - 2  # the first two snapshots do not fill the 45 s window
    first = decisions[0]
    assert first["executors"][0] == 1 and first["executors"][1] > 1
    assert first["changes"]["v1"][0] == 1 and first["changes"]["v1"][1] > 1
    assert first["reasons"][0]["code"] == PlanReason.LOAD_ABOVE_BAND and first["reasons"][0]["data"]["load"] > 1.0
    assert first["reasons"][0]["text"] == reason_text(Reason.from_json(first["reasons"][0]))
    text = command_output("backtest", "--job", job.name, "--policy", "batch-ratio", "--since", "1h")
    assert "executors 1 -> 4" in text  # SPARK-12133: R = 2.5 adds round(2.5) = 3 executors
    assert text.strip().endswith("10 evaluations, 10 proposals (12 snapshots read)")


def test_backtest_only_reads_the_requested_period_and_rejects_bad_input():
    job = make_job(metric_window_s=45.0)
    make_snapshots(job, count=6, window_s=15.0, end=timezone.now() - timedelta(hours=3))
    assert "0 evaluations, 0 proposals" in command_output("backtest", "--job", str(job.pk), "--since", "1h")
    with pytest.raises(CommandError, match="--policy"):
        command_output("backtest", "--job", str(job.pk), "--policy", "no-such-policy")
    with pytest.raises(CommandError, match="--job"):
        command_output("backtest", "--job", "999999")
    with pytest.raises(CommandError, match="--since"):
        command_output("backtest", "--job", str(job.pk), "--since", "yesterday")
    assert parse_duration_s("90m") == 5400 and parse_duration_s("2d") == 172800 and parse_duration_s("30") == 30


def test_backtest_skips_each_run_s_stabilization_interval_like_the_live_evaluation(settings):
    """The first SCALER_STABILIZATION_S seconds of a run are not evaluated, in a replay as live."""
    settings.SCALER_STABILIZATION_S = 30
    job = make_job(metric_window_s=45.0)
    make_snapshots(job, count=12, window_s=15.0, end=timezone.now() - timedelta(minutes=1))
    decisions = json.loads(command_output("backtest", "--job", str(job.pk), "--policy", "ds2", "--since", "1h",
                                          "--json"))
    # windows start 15 s apart from the run's start; those starting before 30 s are unstable, so a
    # full 45 s window first ends 75 s into the run: the 5th snapshot, leaving 12 - 4 evaluations
    assert len(decisions) == 12 - 4
