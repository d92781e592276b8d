"""The inbox (``webapp.inbox.items``): each kind of waiting item, what takes it out, the page, the
API and the navigation bar's count."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from tests.webapp.factories import make_job, make_snapshots, make_user
from tests.webapp.inbox.factories import make_every_kind, make_inconclusive, make_pending_proposal
from webapp.inbox.items import inbox_count, inbox_items
from webapp.inbox.kinds import ItemKind
from webapp.jobs.models import Job
from webapp.proposals.codes import AuditAction, AuditReason, Reason
from webapp.proposals.lifecycle import audit

pytestmark = pytest.mark.django_db


def test_each_kind_is_listed_once_with_its_page():
    expected = make_every_kind()
    items = inbox_items()
    assert sorted(i.kind for i in items) == sorted(expected)
    for item in items:
        job, path = expected[item.kind]
        assert (item.job_name, item.path) == (job.name, path)
    assert items[0].kind == ItemKind.JOB_DOWN  # a job down comes first
    assert inbox_count() == len(items) == 5


def test_item_data_and_text():
    make_every_kind()
    by_kind = {i.kind: i for i in inbox_items()}
    pending = by_kind[ItemKind.PENDING_PROPOSAL]
    assert 590 <= pending.data["waited_s"] <= 700 and pending.data["changes"] == {"cores": [1, 3]}
    assert "waited 10 min for a decision: cores 1 → 3" in pending.text
    assert by_kind[ItemKind.INCONCLUSIVE_VERIFICATION].data["reason"] == "no micro-batch completed since the change"
    assert by_kind[ItemKind.SCALE_UP_BLOCKED].data["knobs"] == ["cores"]
    assert by_kind[ItemKind.JOB_DOWN].text == "the job is down: no runner has reported for this job"
    assert by_kind[ItemKind.AUTO_APPROVAL_SUSPENDED].since is not None
    down = by_kind[ItemKind.JOB_DOWN]
    assert down.since == Job.objects.get(pk=down.job_id).created_at  # it never sent metrics: since its registration


def test_every_since_on_the_page_has_a_time(client):
    """A job down since its start (no snapshot ever) is down since it was registered: a time, not a dash."""
    make_every_kind()
    client.force_login(make_user("reader"))
    html = client.get("/inbox/").content.decode()
    rows = dict(re.findall(r'<tr data-kind="([a-z_]+)".*?>(.*?)</tr>', html, re.S))
    assert set(rows) == set(ItemKind)
    for kind, row in rows.items():
        since = re.findall(r"<td>(.*?)</td>", row, re.S)[2]
        assert re.fullmatch(r'<span title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">.+ ago</span>', since), (kind, since)


def test_a_job_is_down_since_its_newest_snapshot():
    job = make_job("orders")
    snapshots = make_snapshots(job, count=3)
    Job.objects.filter(pk=job.pk).update(health=Job.Health.DOWN)
    (item,) = inbox_items()
    assert (item.kind, item.since) == (ItemKind.JOB_DOWN, snapshots[-1].collected_at)


def test_an_inconclusive_verification_leaves_once_a_person_acted_or_a_newer_proposal_came():
    user = make_user()
    looked_at = make_job("looked-at")
    make_inconclusive(looked_at)
    audit(job=looked_at, actor=user, action=AuditAction.POLICY_CHANGED, reason=Reason(AuditReason.POLICY_EDITED))
    superseded = make_job("superseded")
    make_inconclusive(superseded)
    make_pending_proposal(superseded, waited_s=0)
    kinds = {(i.kind, i.job_name) for i in inbox_items()}
    assert kinds == {(ItemKind.PENDING_PROPOSAL, "superseded")}
    assert inbox_count() == 1


def test_the_count_is_two_queries_whatever_the_number_of_jobs():
    make_every_kind()
    for n in range(5):
        make_pending_proposal(make_job(f"more-{n}"))
    with CaptureQueriesContext(connection) as queries:
        assert inbox_count() == 10
    assert len(queries) == 2


def test_page_lists_each_item_with_its_link_and_the_bar_counts_them(client):
    expected = make_every_kind()
    client.force_login(make_user("viewer", role="viewer"))
    page = client.get("/inbox/").content.decode()
    for kind, (_job, path) in expected.items():
        assert f'data-kind="{kind}"' in page and f'href="{path}"' in page
    overview = client.get("/").content.decode()
    assert '<span class="badge inbox-count" id="inbox-count">5</span>' in overview


def test_page_when_nothing_waits(client):
    client.force_login(make_user())
    page = client.get("/inbox/").content.decode()
    assert 'id="inbox-empty"' in page and 'id="inbox-count"' not in page


def test_the_bar_costs_nothing_on_a_fragment(client, monkeypatch):
    make_every_kind()
    client.force_login(make_user())
    counted = []
    monkeypatch.setattr("webapp.inbox.context.inbox_count", lambda: counted.append(1) or 0)
    client.get("/")
    assert counted == [1]  # the page draws the bar
    assert client.get("/jobs/live/").status_code == 200
    assert counted == [1]  # the fragment does not


def test_api_lists_the_same_items():
    expected = make_every_kind()
    token = Token.objects.create(user=make_user("api-viewer", role="viewer"))
    api = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = api.get("/api/inbox/").json()
    assert body["count"] == 5
    assert {(i["kind"], i["path"]) for i in body["items"]} == {(k, p) for k, (_j, p) in expected.items()}
    assert all(i["text"] and "job" in i and "data" in i for i in body["items"])
    assert Client().get("/api/inbox/").status_code in (401, 403)
    down_job = expected[ItemKind.JOB_DOWN][0]
    assert [i["kind"] for i in api.get(f"/api/inbox/?job={down_job.pk}").json()["items"]] == ["job_down"]
    assert api.get("/api/inbox/?kind=pending_proposal").json()["count"] == 1
    assert api.get("/api/inbox/?kind=nope").status_code == 400
    assert api.get("/api/inbox/?job=x").status_code == 400
    assert api.get("/api/inbox/?kind=").status_code == api.get("/api/inbox/?job=").status_code == 400
