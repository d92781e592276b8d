"""The progress-bounded waits of ``tests/waiting.py``: a command that keeps writing runs past the stall
limit to its end; one that falls silent is killed and named."""

from __future__ import annotations

import sys

import pytest

from tests.waiting import run_while_progressing

#: Writes a line every 0.3 s for about 3 s: longer than the stall limit, never silent that long.
TALKER = ("import sys, time\nfor i in range(10):\n    print(i, file=sys.stderr, flush=True)\n    time.sleep(0.3)\n"
          "print('done')")


def test_a_command_that_keeps_writing_runs_past_the_stall_limit_to_its_end(tmp_path):
    done = run_while_progressing([sys.executable, "-c", TALKER], what="the talker", stall_s=1.5, cwd=tmp_path,
                                 interval_s=0.1)
    assert (done.returncode, done.stdout, done.stderr.split()) == (0, "done\n", [str(i) for i in range(10)])


def test_a_silent_command_is_killed_after_the_stall_limit_and_named(tmp_path):
    silent = "import sys, time\nprint('started', file=sys.stderr, flush=True)\ntime.sleep(600)"
    with pytest.raises(AssertionError, match=r"the sleeper: no output for 1 s; killed\. Its stderr ends:\nstarted"):
        run_while_progressing([sys.executable, "-c", silent], what="the sleeper", stall_s=1, cwd=tmp_path,
                              interval_s=0.1)
