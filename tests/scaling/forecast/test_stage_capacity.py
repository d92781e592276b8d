"""Stage capacities in the job's units add up to the job's capacity (scaling.forecast.stage_capacity)."""

import pytest

from scaling.forecast import prediction as forecast
from scaling.forecast.stage_capacity import busy_shares, combined_capacity_per_s, stage_capacities_per_s
from scaling.planner.sizing import busy_share


def test_the_stages_capacities_combine_into_the_jobs_own_formula():
    stages = [(1000.0, 60_000.0), (1000.0, 70_000.0), (500.0, 40_000.0), (900.0, 65_000.0)]
    each = stage_capacities_per_s(stages, source_rate_per_s=1000.0, slots=[2] * 4, overhead_fraction=0.1)
    job = forecast.capacity_per_s(2, 0.1, forecast.cost_core_s_per_record(stages, 1000.0))
    assert combined_capacity_per_s(each) == pytest.approx(job)
    assert all(c > job for c in each)  # every stage alone is above the job: they share the cores in turn
    assert sum(busy_shares(each)) == pytest.approx(1.0)
    assert max(busy_shares(each)) == busy_shares(each)[each.index(min(each))]


def test_a_stage_without_input_costs_nothing_and_a_stage_gains_only_the_cores_its_tasks_use():
    stages = [(1000.0, 5000.0), (0.0, 1.0), (1000.0, 8000.0)]
    one = stage_capacities_per_s(stages, source_rate_per_s=1000.0, slots=[1, 1, 1], overhead_fraction=0.0)
    # 2 → 4 cores: the first stage's 4 tasks use them all, the last stage's 2 tasks only 2
    two = stage_capacities_per_s(stages, source_rate_per_s=1000.0, slots=[4, 4, 2], overhead_fraction=0.0)
    assert one == [5000.0, None, 8000.0] and two == [20_000.0, None, 16_000.0]
    assert combined_capacity_per_s([None]) is None


def test_the_jobs_capacity_is_the_rate_at_which_the_batches_fill_the_interval():
    stages, slots, overhead = [(1000.0, 5000.0), (1000.0, 8000.0)], [4, 2], 0.1
    job = combined_capacity_per_s(stage_capacities_per_s(stages, source_rate_per_s=1000.0, slots=slots,
                                                         overhead_fraction=overhead))
    demands = [(target / tpr * job / 1000.0, tasks) for (target, tpr), tasks in zip(stages, slots)]
    assert busy_share(demands, 4, overhead) == pytest.approx(1.0)
