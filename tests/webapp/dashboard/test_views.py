"""Dashboard pages and the REST API."""

import pytest
from rest_framework.authtoken.models import Token

from tests.webapp.factories import make_job, make_snapshots, make_user
from webapp.loop.evaluate import evaluation_run

pytestmark = pytest.mark.django_db


def test_anonymous_user_is_sent_to_login(client):
    job = make_job()
    for url in ("/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/live/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/api/jobs/").status_code in (401, 403)


def test_job_page_and_live_dag_have_one_node_per_vertex(client):
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    client.force_login(make_user())
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    assert b"Approve" in page.content and b"plotly.min.js" in page.content
    live = client.get(f"/jobs/{job.pk}/live/").json()
    nodes = [t for t in live["dag"]["data"] if t.get("name") == "vertices"][0]
    assert len(nodes["x"]) == 3
    assert nodes["marker"]["cmin"] == 0 and nodes["marker"]["cmax"] == 1
    assert all(0 <= u <= 1 for u in nodes["marker"]["color"])
    assert all(v["true_processing_rate"] != "inf" and v["true_processing_rate"] > 0 for v in live["vertices"])
    # The pending proposal's parallelism shows as p -> p' on the node.
    assert any("p 1 → " in a["text"] for a in live["dag"]["layout"]["annotations"] if a["name"].startswith("node:"))


def test_api_approve_then_conflict(client, monkeypatch):
    monkeypatch.setattr("webapp.proposals.dispatch.send", lambda *args: None)
    job = make_job(metric_window_s=45)
    make_snapshots(job)
    evaluation_run(job=job)
    token = Token.objects.create(user=make_user())
    headers = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    listed = client.get(f"/api/proposals/?job={job.pk}&status=pending", **headers).json()
    assert listed["count"] == 1
    pk = listed["results"][0]["id"]
    first = client.post(f"/api/proposals/{pk}/approve/", **headers)
    assert first.status_code == 200 and first.json()["status"] == "approved"
    second = client.post(f"/api/proposals/{pk}/approve/", **headers)
    assert second.status_code == 409 and "not pending" in second.json()["detail"]


def test_static_plotly_is_served_locally(client):
    response = client.get("/static/plotly/plotly.min.js")
    assert response.status_code == 200
