"""``manage.py backtest --job ID --policy NAME --since 24h``: replay a job's stored snapshots through a
policy and print what it would have proposed and when, to try a policy before enabling it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scaling.policy.option_types import PolicyError
from scaling.scenario.replay import ReplayStep, describe, replay
from webapp.jobs.memory import memory_inputs
from webapp.jobs.models import Job
from webapp.jobs.plans import reason_json
from webapp.jobs.policy_mapping import scaling_policy
from webapp.jobs.window import stored_issues
from webapp.loop.window import stable_snapshots, window_inputs

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration_s(text: str) -> float:
    """``90s``, ``15m``, ``24h``, ``2d`` (a bare number is seconds). Raises CommandError."""
    match = _DURATION.match(text)
    if not match:
        raise CommandError(f"--since: expected a duration like 24h, 90m or 3600s, got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


class Command(BaseCommand):
    help = "Replay a job's stored metric snapshots through a policy; print what it would have proposed and when."

    def add_arguments(self, parser):
        parser.add_argument("--job", required=True, help="The job's id (or name).")
        parser.add_argument("--policy", default="ds2", help="A registered policy: ds2, batch-ratio or "
                                                            "min-increase.")
        parser.add_argument("--since", default="24h", help="How far back: 24h, 90m, 3600s, 2d.")
        parser.add_argument("--all", dest="show_all", action="store_true",
                            help="Print every evaluation, not only proposals.")
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the decisions as JSON.")

    def handle(self, *args, job: str, policy: str, since: str, show_all: bool, as_json: bool, **options):
        found = Job.objects.select_related("policy").filter(pk=int(job)) if job.isdigit() else \
            Job.objects.select_related("policy").filter(name=job)
        target = found.first()
        if target is None:
            raise CommandError(f"--job: no job {job!r}")
        try:
            scaling = replace(scaling_policy(target.policy), algorithm=policy)
        except PolicyError as exc:
            raise CommandError(f"--policy: {exc}") from None
        window_s = target.policy.metric_window_s
        start = timezone.now() - timedelta(seconds=parse_duration_s(since))
        snapshots = list(target.snapshots.filter(collected_at__gte=start - timedelta(seconds=window_s))
                         .order_by("collected_at").prefetch_related("vertices"))
        steps = []
        for i, snapshot in enumerate(snapshots):
            if snapshot.collected_at < start or not snapshot.vertices.all():
                continue
            # The window as the live evaluation sees it: same run and configuration, within window_s,
            # without the run's stabilization interval (webapp.loop.window.stable_snapshots, as evaluation_run).
            window = stable_snapshots(job=target, snapshots=[
                s for s in snapshots[:i + 1]
                if (snapshot.collected_at - s.collected_at).total_seconds() < window_s and s.config == snapshot.config])
            if sum(s.window_s for s in window) < 0.9 * window_s:
                continue
            topology, metrics, cluster, mean_batch_s = window_inputs(job=target, snapshots=window)
            # the samples' stored readiness (the binding then is not known: the knobs may have changed since)
            steps.append(ReplayStep(snapshot.collected_at.timestamp(), topology, metrics, cluster,
                                    (mean_batch_s,) if mean_batch_s else (),
                                    tuple(issue for s in window for issue in stored_issues(s)),
                                    memory_inputs(job=target, snapshots=window)))
        try:
            decisions = replay(steps, scaling)
        except PolicyError as exc:
            raise CommandError(f"--policy: {exc}") from None
        shown = [d for d in decisions if show_all or d.proposed]
        if as_json:
            self.stdout.write(json.dumps([{
                "at": datetime.fromtimestamp(d.at_s, tz=dt_timezone.utc).isoformat(), "decision": d.decision,
                "proposed": d.proposed, "executors": [d.executors_current, d.executors_proposed],
                "changes": {k: list(v) for k, v in d.changes.items()},
                "reasons": [reason_json(r) for r in d.reasons]} for d in shown],
                indent=1))
            return
        for d in shown:
            at = datetime.fromtimestamp(d.at_s, tz=dt_timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            self.stdout.write(f"{at}  {describe(d)}")
        self.stdout.write(f"{target.name}: policy {policy!r} over {since}: {len(decisions)} evaluations, "
                          f"{sum(d.proposed for d in decisions)} proposals ({len(snapshots)} snapshots read)")

