"""The per-stage formulas of ``scaling.values.metrics`` at the numbers of their docstrings."""

from __future__ import annotations

import pytest

from scaling.values.metrics import paced_task_busy_s


@pytest.mark.parametrize("slowest_s, busy_s, tasks, slots, paced_s", [
    (3.0, 4.0, 2, 4, 3.0),   # 2 tasks on 4 slots use 2 of them: the slowest task, FLIP-271's MAX
    (3.0, 4.0, 2, 2, 3.0),   # n = slots: the same
    (3.0, 3.0, 1, 8, 3.0),   # one task: its own time, whatever the slots
    (3.0, 6.0, 4, 2, 1.5),   # n > slots: max(3 × 2 / 4, 6 / 4)
])
def test_the_pace_of_a_stage_with_fewer_tasks_than_slots_is_its_slowest_task(slowest_s, busy_s, tasks, slots,
                                                                           paced_s):
    """``max(slowest × s / n, busy / n)`` with ``s = min(n, slots)``: with ``n ≤ slots`` each task has a slot."""
    assert paced_task_busy_s(slowest_s, busy_s, tasks, slots) == paced_s
