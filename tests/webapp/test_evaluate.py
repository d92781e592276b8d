"""One evaluation (``webapp.loop.evaluate``): its policy and its stage bindings are built once and
passed through its steps."""

import pytest

from tests.webapp.factories import make_job, make_snapshots
from webapp.jobs import bindings, policy_mapping
from webapp.loop import evaluate

pytestmark = pytest.mark.django_db


def counting(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` by a wrapper that records each call; returns the record."""
    calls, real = [], getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("count, decision", [(4, "scale"), (1, None)])
def test_an_evaluation_builds_the_policy_once_and_binds_the_stages_once(monkeypatch, count, decision):
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=count)
    policies = counting(monkeypatch, evaluate, "scaling_policy")
    parsed = counting(monkeypatch, bindings, "plan_stages_from_json")
    bound = counting(monkeypatch, bindings, "bind_stages")
    evaluation = evaluate.evaluation_run(job=job)
    assert (evaluation.decision if evaluation else None) == decision
    evaluated = 1 if evaluation else 0
    # the newest snapshot's stages bound once, and the plan's stages once (the pinned knobs)
    assert (len(policies), len(parsed), len(bound)) == (evaluated, evaluated, 2 * evaluated)


def test_the_context_holds_the_bindings_of_the_newest_snapshot_and_the_pinned_knobs():
    job = make_job(metric_window_s=45)
    snapshots = make_snapshots(job, count=4)
    ctx = evaluate.evaluation_context(job=job, snapshots=snapshots, now=snapshots[-1].collected_at)
    assert ctx.policy == policy_mapping.scaling_policy(job.policy)
    assert ctx.bindings == bindings.stage_bindings(job=job, snapshot=snapshots[-1])
    assert ctx.pinned == tuple(bindings.pinned_knobs(job=job))
    assert ctx.positions == {v.vertex_id: v.position for v in snapshots[-1].vertices.all()}
