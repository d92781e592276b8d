"""sparkclient.runner.procgroup.end_process_group: a whole process group ends, including members that
ignore SIGTERM (the one TERM -> KILL helper of the supervisor, the cluster and the demo)."""

import subprocess

from sparkclient.runner.procgroup import end_process_group, group_members


def _start_group(script: str) -> subprocess.Popen:
    process = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdin=subprocess.DEVNULL)
    # wait until the background member has joined the group (the shell forks it first)
    for _ in range(200):
        if len(group_members(process.pid)) >= 2:
            break
        subprocess.run(["sleep", "0.02"], check=True)
    return process


def test_a_group_that_honours_sigterm_ends_with_its_leader_and_its_background_member():
    process = _start_group("sleep 300 & sleep 300")
    members = [p.pid for p in group_members(process.pid)]
    assert process.pid in members and len(members) >= 2

    assert end_process_group(process.pid, term_wait_s=10.0) == []
    assert group_members(process.pid) == []
    assert process.poll() is not None


def test_members_that_ignore_sigterm_get_sigkill():
    process = _start_group("trap '' TERM; sleep 300 & sleep 300")

    assert end_process_group(process.pid, term_wait_s=0.5, kill_wait_s=10.0) == []
    assert group_members(process.pid) == []


def test_a_group_that_is_gone_is_nothing_to_do():
    process = subprocess.Popen(["true"], start_new_session=True)
    process.wait()
    assert end_process_group(process.pid, grace_s=0.1) == []
