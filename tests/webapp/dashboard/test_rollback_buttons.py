"""*Roll back* on the history, proposal and job pages: one form (``dashboard/_rollback_form.html``) with
one confirmation, offered for what ``Proposal.can_roll_back`` allows and to operators only; posting it
runs the rollback service and returns to the page it came from."""

from __future__ import annotations

import re

import pytest

from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_user
from webapp.jobs.models import JobPolicy
from webapp.proposals.models import Proposal

pytestmark = pytest.mark.django_db

#: The pages that offer the rollback, by the URL of a job and a proposal.
PAGES = {
    "history": lambda job, proposal: f"/jobs/{job.pk}/history/",
    "proposal": lambda job, proposal: f"/proposals/{proposal.pk}/",
    "job": lambda job, proposal: f"/jobs/{job.pk}/",
}


def rollback_form(html: str, pk: int) -> str | None:
    """The form that rolls back proposal ``pk`` on a page, or None."""
    found = re.search(rf'<form method="post" action="/proposals/{pk}/rollback/".*?</form>', html, re.S)
    return found.group(0) if found else None


def confirmation(form: str) -> str:
    return re.search(r'data-confirm="([^"]*)"', form).group(1)


@pytest.mark.parametrize("page", PAGES)
def test_a_succeeded_scale_proposal_is_offered_with_the_one_confirmation(client, operator, page):
    job = make_job()
    done = make_succeeded(job, cores_from=1, cores_to=2)
    form = rollback_form(client.get(PAGES[page](job, done)).content.decode(), done.pk)
    assert form is not None and f'id="rollback-{done.pk}"' in form
    assert confirmation(form) == (f"Roll back proposal #{done.pk}? The job restarts with the configuration it "
                                  "replaced (cores 2 → 1), and auto-approval is suspended until a person turns "
                                  "it back on.")
    assert f'name="next" value="{PAGES[page](job, done)}"' in form


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_the_history_page_s_confirmation(client, operator, page):
    job = make_job()
    done = make_succeeded(job)
    history = rollback_form(client.get(PAGES["history"](job, done)).content.decode(), done.pk)
    here = rollback_form(client.get(PAGES[page](job, done)).content.decode(), done.pk)
    assert confirmation(here) == confirmation(history)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("kind,status", [("rollback", "succeeded"), ("scale", "rolled_back"),
                                         ("scale", "rolling_back"), ("scale", "failed")])
def test_no_offer_across_each_edge_of_can_roll_back(client, operator, page, kind, status):
    """Beside a succeeded scale proposal (offered), one that differs in its kind or its status is not."""
    job = make_job()
    offered = make_succeeded(job)
    other = make_succeeded(job, cores_from=2, cores_to=3)
    Proposal.objects.filter(pk=other.pk).update(kind=kind, status=status,
                                                rollback_of=offered if kind == "rollback" else None)
    html = client.get(PAGES[page](job, other)).content.decode()
    assert rollback_form(html, other.pk) is None
    if page != "proposal":  # the job's pages list both
        assert rollback_form(html, offered.pk) is not None


@pytest.mark.parametrize("page", PAGES)
def test_a_viewer_is_offered_no_rollback(client, page):
    job = make_job()
    done = make_succeeded(job)
    client.force_login(make_user("viewer", role="viewer"))
    assert rollback_form(client.get(PAGES[page](job, done)).content.decode(), done.pk) is None
    assert client.post(f"/proposals/{done.pk}/rollback/").status_code == 403


@pytest.mark.parametrize("page", ["proposal", "job"])
def test_rolling_back_from_a_page_runs_the_service_and_returns_there(
        client, operator, no_enqueue, django_capture_on_commit_callbacks, page):
    job = make_job()
    done = make_succeeded(job, cores_from=1, cores_to=2)
    here = PAGES[page](job, done)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/proposals/{done.pk}/rollback/", {"next": here})
    assert response.status_code == 302 and response["Location"] == here
    done.refresh_from_db()
    rollback = Proposal.objects.get(rollback_of=done)
    assert done.status == "rolling_back"
    assert (rollback.kind, rollback.status, rollback.proposed_config["cores"]) == ("rollback", "approved", 1)
    assert no_enqueue == [rollback.pk] and JobPolicy.objects.get(job=job).auto_approve_suspended
    html = client.get(here).content.decode()
    assert f"Rolling back proposal {done.pk} (rollback #{rollback.pk})." in html
    assert rollback_form(html, done.pk) is None


def test_a_refused_rollback_says_why_on_the_page_it_came_from(client, operator, no_enqueue):
    """A pending proposal has nothing to roll back: the service refuses, the page says why, nothing changes."""
    job = make_job()
    pending = make_succeeded(job)
    Proposal.objects.filter(pk=pending.pk).update(status="pending")
    here = PAGES["proposal"](job, pending)
    response = client.post(f"/proposals/{pending.pk}/rollback/", {"next": here}, follow=True)
    assert response.redirect_chain == [(here, 302)]
    assert not Proposal.objects.filter(rollback_of=pending).exists() and no_enqueue == []
    assert Proposal.objects.get(pk=pending.pk).status == "pending"
    assert re.search(r'<div class="msg error">[^<]+</div>', response.content.decode())
