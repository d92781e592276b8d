"""The history page's audit trail (NetBox's change log): every action's fields as field → before →
after in words and units, the actor by name, the reason from its code; pagination, filters by action
and actor, and a bounded number of queries however long the trail. Its server time is measured by
``python -m tests.webapp.dashboard.bench_history``, never asserted here."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scaling.words.reason_text import LOAD_NAME
from tests.webapp.dashboard.history_factories import event_specs, make_every_event
from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_user
from webapp.dashboard.history import PER_PAGE, duration, measure, number, value_text
from webapp.proposals.codes import Actor, AuditAction

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(client):
    user = make_user("ada")
    user.first_name, user.last_name = "Ada", "Lovelace"
    user.save()
    client.force_login(user)
    return user


def _audit(html: str) -> str:
    return html[html.index('<table class="grid" id="audit">'):html.index("</section>", html.index('id="audit"'))]


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-action="([a-z_]+)" data-event=', _audit(html))


def _prose(html: str) -> str:
    """The audit trail's visible text (tags and attribute values dropped)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", _audit(html)))


def test_every_action_reads_as_words_and_units_never_a_repr(client, ada):
    job = make_job()
    done = make_succeeded(job)
    make_every_event(job, done.pk, ada)
    html = client.get(f"/jobs/{job.pk}/history/").content.decode()
    assert set(AuditAction.values) <= set(_rows(html)), set(AuditAction.values) - set(_rows(html))
    text = _prose(html)
    assert "{'" not in html and "': " not in text and "['" not in text
    for word in ("None", "True", "False"):
        assert not re.search(rf"\b{word}\b", text), (word, text[max(0, text.find(word) - 200):text.find(word) + 50])


def test_each_event_shows_its_fields_before_and_after_with_units(client, ada):
    job = make_job()
    done = make_succeeded(job)
    make_every_event(job, done.pk, ada)
    audit = _audit(client.get(f"/jobs/{job.pk}/history/").content.decode())

    def row(action: str) -> str:
        # the oldest of its rows: the one of make_every_event, not of make_succeeded
        return [chunk for chunk in audit.split("<tr data-action=")[1:] if chunk.startswith(f'"{action}"')][-1]

    policy = row("policy_changed")
    max_cores = r'title="max_cores">max cores</th><td class="before">8 cores</td><td class="after"><b>6 cores'
    assert re.search(max_cores, policy)
    assert "catch up duration</th><td class=\"before\">2 min</td><td class=\"after\"><b>5 min" in policy
    assert ">70 %</td>" in policy and "yes" in policy and ">—</td>" in policy  # share, bool, None
    assert 'class="actor">Ada Lovelace<' in policy
    proposed = row("proposed")
    assert '<tr data-knob="cores" class="changed">' in proposed and "→ <b>2</b>" in proposed
    assert "unchanged</summary>" in proposed and f"{LOAD_NAME} 1.59" in proposed  # the plan's reason, in words
    verified = row("verification_verified")
    assert "realized capacity</th><td class=\"after\">2,410 rec/s" in verified
    assert "not caught up in the window" in verified and "9,845 rec/s" in verified
    assert '<details class="stages">' in verified  # the per-stage table folds
    suspended = row("auto_approve_suspended")
    assert "auto-approval suspended</th><td class=\"before\">no</td><td class=\"after\"><b>yes</b>" in suspended
    assert 'class="actor">the ds2 policy<' in row("auto_approve_held")
    assert 'class="actor">system (reconciler)<' in row("reconciled")
    registration = row("job_changed")
    assert ('title="knobs">knob cores</th><td class="before">sets executors, 1–8, default 1</td>'
            '<td class="after"><b>sets executors, 1–16, default 1</b>') in registration
    assert "<th>Sent</th>" in row("attempt_started")
    assert "no further attempt" in row("attempt_unanswered")


def test_pages_of_50_newest_first(client, ada):
    job = make_job()
    made = make_every_event(job, None, ada, count=120)
    first = client.get(f"/jobs/{job.pk}/history/").content.decode()
    assert len(_rows(first)) == PER_PAGE and "page 1 of 3" in first
    assert f'data-event="{made[-1].pk}"' in first and f'data-event="{made[0].pk}"' not in first
    last = client.get(f"/jobs/{job.pk}/history/", {"page": 3}).content.decode()
    assert len(_rows(last)) == 20 and f'data-event="{made[0].pk}"' in last
    assert 'rel="prev"' in last and 'rel="next"' not in last


def test_filters_by_action_and_by_actor_and_keep_the_filter_across_pages(client, ada):
    job = make_job()
    make_every_event(job, None, ada, count=len(event_specs(job, None, ada)) * 4)
    rejected = client.get(f"/jobs/{job.pk}/history/", {"action": "rejected"}).content.decode()
    assert set(_rows(rejected)) == {"rejected"} and len(_rows(rejected)) == 4
    assert '<option value="rejected" selected>rejected</option>' in rejected
    by_policy = client.get(f"/jobs/{job.pk}/history/", {"actor": Actor.policy("ds2")}).content.decode()
    assert set(_rows(by_policy)) == {"approved", "auto_approve_held"}
    assert '<option value="policy:ds2" selected>the ds2 policy</option>' in by_policy
    assert 'id="audit-filtered">filtered: by the ds2 policy<' in by_policy
    both = client.get(f"/jobs/{job.pk}/history/", {"action": "approved", "actor": "ada"}).content.decode()
    assert _rows(both) == ["approved"] * 4 and 'id="audit-filtered">filtered: approved, by ada<' in both
    by_system = client.get(f"/jobs/{job.pk}/history/", {"actor": "system"}).content.decode()
    assert "page 1 of 2" in by_system and "?actor=system&amp;page=2" in by_system
    unknown = client.get(f"/jobs/{job.pk}/history/", {"action": "no-such-action"}).content.decode()
    assert len(_rows(unknown)) == PER_PAGE  # an unknown action filters nothing
    assert 'data-action' not in _audit(client.get(f"/jobs/{job.pk}/history/", {"actor": "nobody"}).content.decode())


def _queries(client, url: str) -> int:
    client.get(url)  # warm the session
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200 and len(_rows(response.content.decode())) == PER_PAGE
    return len(queries)


def test_the_first_page_of_1000_events_reads_a_bounded_number_of_queries(client, ada):
    short, long = make_job("short"), make_job("long")
    for job, count in ((short, PER_PAGE), (long, 1000)):
        make_every_event(job, make_succeeded(job).pk, ada, count=count)
    queries = _queries(client, f"/jobs/{long.pk}/history/")
    assert queries <= 15
    assert queries == _queries(client, f"/jobs/{short.pk}/history/")  # none per event: no N+1
    with CaptureQueriesContext(connection) as live:
        assert client.get(f"/jobs/{long.pk}/history/live/", {"page": 20}).status_code == 200
    assert len(live) <= queries


def test_values_read_in_their_units():
    assert value_text("catch_up_duration_s", 120.0) == "2 min" and duration(3725) == "1 h 2 min"
    assert duration(4.26) == "4.3 s" and duration(150) == "2 min 30 s"
    assert value_text("utilization_target", 0.7) == "70 %" and value_text("capacity_per_s", 9845.017) == "9,845 rec/s"
    assert number(0.254) == "0.25" and number(12.0) == "12" and number(float("inf")) == "∞"
    assert measure(1, "cores") == "1 core" and measure(3, "cores") == "3 cores"
    assert value_text("auto_approve_suspended", False) == "no" and value_text("anything", None) == "—"
    assert value_text("excluded_periods", []) == "none" and value_text("knobs", ["cores"]) == "cores"
    assert value_text("status", "rolling_back") == "rolling back"
