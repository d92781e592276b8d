"""Roles. A viewer cannot approve (403 in the API, no button in the page); an
operator can; an anonymous user is redirected to login (and the API wants a token or session)."""

from __future__ import annotations

import json

import pytest
from rest_framework.authtoken.models import Token

from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db  # the three role tests also carry the workflow marker


@pytest.fixture
def pending(monkeypatch):
    monkeypatch.setattr("webapp.proposals.dispatch.send", lambda *args: None)
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    return job.proposals.get(status=Proposal.Status.PENDING)


def _token(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=user).key}"}


@pytest.mark.workflow
def test_viewer_cannot_approve_reject_or_roll_back(client, pending):
    viewer = make_user("vera", role="viewer")
    headers = _token(viewer)
    assert client.get(f"/api/proposals/{pending.pk}/", **headers).status_code == 200  # reads are fine
    for action, body in (("approve", {}), ("reject", {"comment": "no"}), ("rollback", {})):
        response = client.post(f"/api/proposals/{pending.pk}/{action}/", body, **headers)
        assert response.status_code == 403, (action, response.content)
    client.force_login(viewer)
    page = client.get(f"/jobs/{pending.job_id}/").content.decode()
    assert 'value="approve"' not in page and ">Approve<" not in page
    assert client.post(f"/proposals/{pending.pk}/decide/", {"action": "approve"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == Proposal.Status.PENDING
    assert not AuditEvent.objects.filter(proposal=pending, action="approved").exists()


@pytest.mark.workflow
def test_operator_can_approve(client, pending):
    operator = make_user("otto", role="operator")
    client.force_login(operator)
    page = client.get(f"/jobs/{pending.job_id}/").content.decode()
    assert 'value="approve"' in page
    response = client.post(f"/api/proposals/{pending.pk}/approve/", **_token(operator))
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert AuditEvent.objects.get(proposal=pending, action="approved").actor_user.username == "otto"


@pytest.mark.workflow
def test_anonymous_is_redirected_to_login_and_the_api_wants_credentials(client, pending):
    for url in ("/", f"/jobs/{pending.job_id}/", f"/audit/jobs/{pending.job_id}.csv"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert client.get("/api/proposals/").status_code in (401, 403)
    assert client.post(f"/api/proposals/{pending.pk}/approve/").status_code in (401, 403)


def test_csrf_stays_on_for_the_approve_form(pending):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("carl"))
    assert strict.post(f"/proposals/{pending.pk}/decide/", {"action": "approve"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == Proposal.Status.PENDING


def test_admin_edits_policies_and_the_audit_trail_exports(client, pending):
    admin_user = make_user("ada", role="admin")
    assert admin_user.is_staff and admin_user.has_perm("jobs.change_jobpolicy")
    assert not make_user("vic", role="viewer").has_perm("jobs.change_jobpolicy")
    client.force_login(admin_user)
    assert client.get(f"/admin/jobs/job/{pending.job_id}/change/").status_code == 200
    csv_body = client.get(f"/audit/jobs/{pending.job_id}.csv").getvalue().decode()
    assert csv_body.splitlines()[0] == "id,at,job,proposal,actor,action,before,after,reason,reason_code,reason_data"
    assert ",policy:ds2,proposed," in csv_body
    events = json.loads(client.get(f"/audit/jobs/{pending.job_id}.json").getvalue())["events"]
    assert [e["action"] for e in events] == ["proposed"]
