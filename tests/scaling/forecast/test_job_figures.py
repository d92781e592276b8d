"""The job's figures every page states, each from one function (scaling.forecast.job_figures)."""

from dataclasses import replace

import pytest

from scaling.forecast import prediction as forecast
from scaling.forecast.bounds import BoundSource, CoresBound
from scaling.forecast.job_figures import (
    OVERHEAD_SHOWN,
    cores_needed,
    job_capacity,
    overhead_of_batch,
    plan_band,
)
from scaling.values.plan import JobPlan, VertexPlan
from scaling.values.reasons import Decision, Limit, PlanLimit


def _plan(*, tasks=(4, 1), proposed=(8, 1), executors=(4, 8), overhead=0.1, **fields) -> JobPlan:
    """Two stages at 1000 records/s, the first at 5000 records per busy core-second, the second at
    8000, on ``executors`` (now, proposed) of one core."""
    vertices = tuple(VertexPlan(vid, now, new, tpr, tpr, 1.0, 1000.0, 0.0, 1, 0.5, 0.2, True)
                     for vid, now, new, tpr in zip(("src", "agg"), tasks, proposed, (5000.0, 8000.0)))
    return JobPlan(Decision.SCALE, (), vertices, executors_current=executors[0], executors_proposed=executors[1],
                   cores_per_executor=1, overhead_fraction=overhead, **fields)


def test_the_capacity_runs_each_stage_on_the_cores_its_tasks_use():
    plan = _plan()
    now, new = job_capacity(plan, {"src"}), job_capacity(plan, {"src"}, proposed=True)
    assert now.slots == (4, 1) and new.slots == (8, 1)  # one task of agg uses one core of eight
    # 1 / (1 / (4 × 0.9 × 5) + 1 / (1 × 0.9 × 8)) thousand records/s
    assert now.per_s == pytest.approx(1 / (1 / 18_000 + 1 / 7_200))
    assert new.per_s == pytest.approx(1 / (1 / 36_000 + 1 / 7_200))
    assert sum(s for s in now.shares if s is not None) == pytest.approx(1.0)


def test_with_every_stage_on_all_the_cores_it_is_the_forecasts_capacity():
    plan = _plan(tasks=(4, 4), proposed=(8, 8))
    cost = forecast.cost_core_s_per_record([(1000.0, 5000.0), (1000.0, 8000.0)], 1000.0)
    assert job_capacity(plan, {"src"}, proposed=True).per_s == pytest.approx(forecast.capacity_per_s(8, 0.1, cost))
    assert job_capacity(JobPlan(Decision.NO_CHANGE, (), ())).per_s is None


def test_the_band_is_the_policys_but_zero_to_one_in_backlog_mode():
    assert plan_band(_plan(), (0.4, 1.0)) == (0.4, 1.0)
    assert plan_band(_plan(backlog_mode=True), (0.4, 1.0)) == (0.0, 1.0)
    assert plan_band(None, (0.6, 0.8)) == (0.6, 0.8)


def test_the_cores_needed_name_their_cap_only_when_capped():
    bound = CoresBound(cores=8, sources=(BoundSource.POLICY,), policy_max=8)
    assert cores_needed(_plan(cores_needed=6), bound).text == "6 cores needed"
    assert not cores_needed(_plan(cores_needed=8), bound).capped  # at the cap, not above it
    limit = PlanLimit(Limit.MAX_EXECUTORS, None, {"cores_needed": 26, "cores_max": 8})
    at_max = _plan(cores_needed=26, limits=(limit,))
    capped = cores_needed(at_max, bound)
    assert capped.capped and capped.text == "26 cores needed, capped at 8 (the policy's maximum)"
    assert capped.to_dict()["cap"] == 8
    assert cores_needed(at_max).cap_text == "the most cores the plan may ask for"  # no bound to name it by
    fixed = _plan(cores_needed=3, limits=(PlanLimit(Limit.CORES_NOT_ADJUSTABLE, None, {"cores": 1}),))
    assert cores_needed(fixed).text == "3 cores needed, capped at 1 (the pipeline declares no executors knob)"
    assert cores_needed(replace(at_max, cores_needed=None)) is None and cores_needed(None) is None
    unnumbered = _plan(cores_needed=26, limits=(PlanLimit(Limit.MAX_EXECUTORS, None, {}),))  # a stored plan's
    assert cores_needed(unnumbered).text == "26 cores needed"


@pytest.mark.parametrize(("overhead_s", "shown"), [(0.49, False), (0.50, False), (0.51, True)])
def test_the_overhead_is_shown_above_half_of_the_batch(overhead_s, shown):
    share = overhead_of_batch(overhead_s * 4.0, 4.0)
    assert share == pytest.approx(overhead_s)
    assert (share > OVERHEAD_SHOWN) is shown
    assert overhead_of_batch(1.0, 0.0) is None
