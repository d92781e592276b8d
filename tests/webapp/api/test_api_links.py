"""The schema's links between operations (``webapp.api.links``) lead somewhere: each takes a field
the source's answer has, into a parameter (or body field) the target operation takes, of the type
the target expects."""

from __future__ import annotations

import pytest

from webapp.api.links import LINKS, add_links

pytestmark = pytest.mark.django_db


def _schema(admin_api) -> dict:
    return admin_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def _resolved(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _operations(schema: dict) -> dict[str, dict]:
    return {operation["operationId"]: operation for methods in schema["paths"].values()
            for operation in methods.values()}


def _field_type(schema: dict, operation: dict, status: str, field: str) -> str:
    body = _resolved(schema, operation["responses"][status]["content"]["application/json"]["schema"])
    return _resolved(schema, body["properties"][field])["type"]


def test_every_link_takes_a_field_of_its_answer_into_a_parameter_of_its_target(admin_api):
    schema = _schema(admin_api)
    operations = _operations(schema)
    served = {(source, status, name) for source, operation in operations.items()
              for status, answer in operation["responses"].items() for name in answer.get("links", {})}
    assert len(served) == len(LINKS)
    for link in LINKS:
        target = operations[link.target]
        parameters = {f"{p['in']}.{p['name']}": p["schema"] for p in target.get("parameters", [])}
        for parameter, expression in link.parameters.items():
            field = expression.removeprefix("$response.body#/")
            assert parameter in parameters, (link, sorted(parameters))
            assert _field_type(schema, operations[link.source], link.status, field) == parameters[parameter]["type"]
        if link.body is not None:
            request = target["requestBody"]["content"]["application/json"]["schema"]
            assert set(link.body) <= set(_resolved(schema, request)["properties"]), link


def test_a_link_to_an_operation_the_schema_lacks_is_an_error(admin_api):
    schema = _schema(admin_api)
    del schema["paths"]["/api/jobs/{id}/"]["get"]
    with pytest.raises(KeyError, match="api_jobs_retrieve"):
        add_links(schema)
