"""The API answers what its OpenAPI schema says, where schemathesis found it did not: a 404 under
/api/ is JSON with DEBUG on or off (an id past the URL pattern misses every route), a multipart body
that is not form data is a 400, and the audit ``action`` filter accepts exactly what its schema does."""

from __future__ import annotations

import django_filters
import jsonschema_rs
import pytest

from tests.webapp.dashboard_factories import make_succeeded
from tests.webapp.factories import make_job, make_pending
from webapp.api.filters import StrictFilterSet, action_filter
from webapp.api.parsers import multipart_problem
from webapp.proposals.models import AuditEvent, Proposal

pytestmark = pytest.mark.django_db

#: 19 digits: one past ``views.ID_PATTERN`` (and the schema's maximum id).
LONG_ID = "1" + "0" * 18
#: The schema's operations with an id in the path, and the method of each.
ID_OPERATIONS = [
    ("get", "/api/jobs/{id}/"), ("patch", "/api/jobs/{id}/"), ("get", "/api/jobs/{id}/policy/"),
    ("patch", "/api/jobs/{id}/policy/"), ("get", "/api/jobs/{id}/memory/"), ("get", "/api/vertices/{id}/"),
    ("get", "/api/snapshots/{id}/"),
    ("get", "/api/proposals/{id}/"), ("post", "/api/proposals/{id}/approve/"),
    ("post", "/api/proposals/{id}/reject/"), ("post", "/api/proposals/{id}/rollback/"),
    ("get", "/api/executions/{id}/"), ("get", "/api/audit-events/{id}/"),
]


def _schema(admin_api) -> dict:
    return admin_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def test_the_list_of_id_operations_is_the_schemas(admin_api):
    schema = _schema(admin_api)
    documented = {(method, path) for path, operations in schema["paths"].items() if "{id}" in path
                  for method in operations if method in ("get", "post", "patch", "put", "delete")}
    assert documented == set(ID_OPERATIONS)


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(("method", "path"), ID_OPERATIONS)
def test_an_id_past_the_url_pattern_is_a_json_404(admin_api, settings, debug, method, path):
    settings.DEBUG = debug
    response = getattr(admin_api, method)(path.format(id=LONG_ID), {}, content_type="application/json")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}


@pytest.mark.parametrize("debug", [True, False])
def test_404s_outside_the_api_and_slash_redirects_are_unchanged(admin_api, settings, debug):
    settings.DEBUG = debug
    assert admin_api.get("/api/no-such-thing/").json() == {"detail": "Not found."}
    assert admin_api.get("/api/jobs").status_code == 301  # CommonMiddleware's APPEND_SLASH
    page = admin_api.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(("body", "problem"), [
    (b"--B--\r\n", None),
    (b'--B\r\nContent-Disposition: form-data; name="revision"\r\n\r\n3\r\n--B--\r\n', None),
    (b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n\r\n--B\r\n'
     b'Content-Disposition: form-data; name="b"\r\n\r\nx\r\n--B--', None),
    (b"--B\r\nFalse--B--\r\n", "it does not end with its closing boundary on a line of its own"),
    (b"--B\r\nFalse\r\n--B--\r\n", "a part has no Content-Disposition header"),
    (b"False", "it does not start with its boundary"),
    (b"", "it does not start with its boundary"),
])
def test_multipart_structure(body, problem):
    assert multipart_problem(body, b"B") == problem


@pytest.mark.parametrize("value", ["False", "0", "[]", '"x"'])
def test_a_multipart_body_that_is_not_form_data_is_a_400_and_decides_nothing(admin_api, value):
    proposal = make_pending("multipart")
    done = make_succeeded(proposal.job)
    for decision, target in (("approve", proposal), ("reject", proposal), ("rollback", done)):
        body = f"--B\r\n{value}--B--\r\n".encode()
        response = admin_api.post(f"/api/proposals/{target.pk}/{decision}/", body,
                            content_type="multipart/form-data; boundary=B")
        assert response.status_code == 400 and "Malformed multipart body" in response.json()["detail"]
    assert Proposal.objects.get(pk=proposal.pk).status == "pending" and Proposal.objects.count() == 2


def test_form_data_still_decides(admin_api):
    proposal = make_pending("multipart")
    response = admin_api.post(f"/api/proposals/{proposal.pk}/approve/", {"revision": proposal.revision})
    assert response.status_code == 200 and response.json()["status"] == "approved"


def _action_parameter(admin_api) -> dict:
    [parameter] = [p for p in _schema(admin_api)["paths"]["/api/audit-events/"]["get"]["parameters"]
                   if p["name"] == "action"]
    return parameter["schema"]


@pytest.mark.parametrize("value", ["approved", "rejected", "approved\n", " approved", "approved ", "Approved",
                                   "a-b", "x" * 51, "approved\x00", "1approved"])
def test_the_action_filter_accepts_exactly_what_its_schema_accepts(admin_api, value):
    make_job()
    AuditEvent.objects.create(job_id=make_job("other").pk, actor_name="system", action="approved")
    schema = _action_parameter(admin_api)
    # jsonschema-rs reads patterns as JSON Schema does (ECMA 262: "$" is the end of the text), as schemathesis.
    valid = jsonschema_rs.validator_for(schema).is_valid(value)
    response = admin_api.get("/api/audit-events/", {"action": value})
    assert response.status_code == (200 if valid else 400), (value, schema, response.content)
    if value == "approved":
        assert valid and response.json()["count"] == 1


def test_the_action_filter_follows_the_fields_choices(monkeypatch):
    """Once ``AuditEvent.action`` has choices, the filter is a choice filter over them."""
    monkeypatch.setattr(AuditEvent._meta.get_field("action"), "choices", [("approved", "Approved")])
    chosen = action_filter("Only this action.")
    assert isinstance(chosen, django_filters.ChoiceFilter)

    class Filter(StrictFilterSet):
        action = chosen

        class Meta:
            model = AuditEvent
            fields = ["action"]

    assert Filter({"action": "approved"}, queryset=AuditEvent.objects.all()).is_valid()
    for refused in ("approved ", "approved\n", "rejected"):
        assert not Filter({"action": refused}, queryset=AuditEvent.objects.all()).is_valid()


def _query_parameters(admin_api) -> list[tuple[str, str, dict]]:
    """Every (path, name, schema) of a query parameter of a GET operation of the schema."""
    return [(path, parameter["name"], parameter["schema"])
            for path, operations in _schema(admin_api)["paths"].items() if "get" in operations
            for parameter in operations["get"].get("parameters", []) if parameter["in"] == "query"]


@pytest.mark.parametrize("value", ["", "a\x00", "\x00"])
def test_an_empty_or_nul_query_value_is_refused_exactly_where_the_schema_refuses_it(admin_api, value):
    """``?vertex_id=`` and ``?vertex_id=a%00`` were schema-valid (a string of at most 200 characters)
    and a 400 (every filter refuses an empty value, Django's form fields a NUL): schemathesis'
    stateful phase sent both."""
    job = make_job()
    parameters = _query_parameters(admin_api)
    assert {name for _, name, _ in parameters} >= {"vertex_id", "action", "status", "job", "page"}
    answers = {}
    for path, name, schema in parameters:
        valid = jsonschema_rs.validator_for(schema, validate_formats=True).is_valid(value)
        response = admin_api.get(path.format(id=job.pk), {name: value})
        answers[(path, name)] = (valid, response.status_code)
    wrong = {key: answer for key, answer in answers.items() if answer[1] != (200 if answer[0] else 400)}
    assert not wrong, wrong


@pytest.mark.parametrize("comment", ["\x00", "a\x00", "\x00a", " \x00 ", "a\x00b", "no", " no ", " ", "\t"])
def test_a_rejection_comment_is_refused_exactly_where_its_schema_refuses_it(admin_api, comment):
    """A comment whose one non-space character was a NUL matched the schema's pattern (``\\S`` takes
    a NUL) and was a 400 (DRF refuses NUL characters): schemathesis' stateful phase sent one."""
    schema = _schema(admin_api)["components"]["schemas"]["RejectRequest"]
    valid = jsonschema_rs.validator_for(schema).is_valid({"comment": comment})
    proposal = make_pending("nul")
    response = admin_api.post(f"/api/proposals/{proposal.pk}/reject/", {"comment": comment},
                              content_type="application/json")
    assert response.status_code == (200 if valid else 400), (comment, schema, response.content)
