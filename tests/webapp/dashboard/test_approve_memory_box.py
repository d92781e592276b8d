"""The approve form's "also apply the memory recommendation" box (``webapp.dashboard.proposal_page``):
the confirm dialog names the heap change when the box is ticked, and beside the box the page says that
the heap change throws away the standby prepared for the proposal's knobs, with its measured start."""

from __future__ import annotations

import json
from html import unescape

import pytest

from scaling.values.memory import MB
from sparkclient.contract import keys
from tests.webapp.factories import HEAP_KNOB, make_pending, make_user
from webapp.dashboard.proposal_page import approve_confirm, memory_standby_note
from webapp.loop.standby import standby_status
from webapp.proposals.memory import memory_offer
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db

def _cores_pending_heap_smaller(django_capture_on_commit_callbacks) -> Proposal:
    """A job in local mode with a heap knob, keeping up: a pending scale-up of its cores (a new driver) and a
    smaller heap recommended (300 of 1024 MB at peak → 512 MB), not in the proposal."""
    proposal = make_pending("box", knobs=[HEAP_KNOB], cluster="local@127.0.0.1", keeping_up=True,
                            memory={"gc_share": 0.05, "heap_peak_bytes": 300 * MB, "heap_max_bytes": 1024 * MB},
                            commits=django_capture_on_commit_callbacks)
    assert proposal.proposed_config["heap_mb"] == 1024 and proposal.proposed_config["cores"] > 1
    return proposal


def _standby(client, proposal: Proposal, state: str, knobs: dict | None = None, **fields) -> None:
    client.hset(keys.handover(proposal.job.name), mapping={
        "id": "prepared-x", "state": state, "proposal": str(proposal.pk), "prepared": "1",
        "knobs": json.dumps(knobs or proposal.proposed_config, sort_keys=True), **fields})


def test_the_dialog_names_the_heap_change_and_the_box_says_the_standby_starts_again(
        client, workflow_redis, enqueued, django_capture_on_commit_callbacks):
    proposal = _cores_pending_heap_smaller(django_capture_on_commit_callbacks)
    _standby(workflow_redis, proposal, "ready", spawned_at="1000.0", ready_at="1038.4", rss_mb="1373")
    client.force_login(make_user())
    page = unescape(client.get(f"/proposals/{proposal.pk}/").content.decode())
    head = f"Approve revision {proposal.revision} of proposal #{proposal.pk}"
    assert f'data-confirm="{head}? The job restarts with the proposed configuration."' in page
    memory = page.split('id="with-memory" data-confirm="')[1].split('"')[0]
    assert memory.startswith(f"{head} with the memory recommendation added (heap_mb 1,024 → 512 MB)?")
    note = page.split('id="memory-standby">')[1].split("<")[0]
    assert note.startswith("Including the memory change starts a new driver from scratch")
    assert "(ready)" in note and "about 38 s" in note and note in memory


@pytest.mark.parametrize("standby", ["none", "other-knobs", "failed", "starting"])
def test_the_note_only_for_a_standby_prepared_for_the_proposals_knobs(standby, workflow_redis, enqueued,
                                                                      django_capture_on_commit_callbacks):
    proposal = _cores_pending_heap_smaller(django_capture_on_commit_callbacks)
    if standby == "other-knobs":
        _standby(workflow_redis, proposal, "ready", {**proposal.proposed_config, "cores": 7})
    elif standby != "none":
        _standby(workflow_redis, proposal, standby)
    offer, status = memory_offer(proposal), standby_status(proposal)
    note = memory_standby_note(proposal, offer, status)
    assert bool(note) == (standby == "starting")
    assert "about" not in note  # not ready yet: its start is not measured
    assert "heap_mb 1,024 → 512 MB" in approve_confirm(proposal, offer, status)["memory"]
    assert approve_confirm(proposal, None, status)["memory"] == ""
