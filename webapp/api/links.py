"""The OpenAPI links between the API's operations: how an answer's ids lead to the other objects
(a proposal's job, an execution's proposal, a job's proposals, snapshots, vertices, executions and
audit events), and a proposal's revision to its approval. Added to the schema by drf-spectacular's
postprocessing hook :func:`add_links` (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``); clients
and schemathesis' stateful phase follow them."""

from __future__ import annotations

from typing import NamedTuple


class Link(NamedTuple):
    """From the answer ``status`` of operation ``source`` to operation ``target``, whose parameters
    (``"path.id"``, ``"query.job"``) or body take the answer's fields (``"$response.body#/job"``)."""

    source: str
    status: str
    target: str
    parameters: dict[str, str]
    body: dict[str, str] | None = None


#: The operations that answer one job, one proposal (a decision answers the proposal it decided).
JOB_ANSWERS = [("api_jobs_retrieve", "200"), ("api_jobs_create", "201"), ("api_jobs_partial_update", "200")]
PROPOSAL_ANSWERS = [("api_proposals_retrieve", "200"), ("api_proposals_approve_create", "200"),
                    ("api_proposals_reject_create", "200"), ("api_proposals_rollback_create", "200")]
#: The lists a job filters (``?job=<id>``).
JOB_LISTS = ["api_proposals_list", "api_executions_list", "api_snapshots_list", "api_vertices_list",
             "api_audit_events_list", "inbox_list"]

LINKS = [
    *(Link(source, status, target, {"query.job": "$response.body#/id"})
      for source, status in JOB_ANSWERS for target in JOB_LISTS),
    *(Link(source, status, "api_jobs_retrieve", {"path.id": "$response.body#/job"})
      for source, status in PROPOSAL_ANSWERS),
    *(Link(source, status, "api_audit_events_list", {"query.proposal": "$response.body#/id"})
      for source, status in PROPOSAL_ANSWERS),
    Link("api_proposals_retrieve", "200", "api_proposals_approve_create", {"path.id": "$response.body#/id"},
         body={"revision": "$response.body#/revision"}),
    Link("api_executions_retrieve", "200", "api_proposals_retrieve", {"path.id": "$response.body#/proposal"}),
    Link("api_audit_events_retrieve", "200", "api_jobs_retrieve", {"path.id": "$response.body#/job"}),
    Link("api_snapshots_retrieve", "200", "api_jobs_retrieve", {"path.id": "$response.body#/job"}),
    Link("api_snapshots_retrieve", "200", "api_vertices_list", {"query.job": "$response.body#/job"}),
    Link("api_vertices_retrieve", "200", "api_snapshots_retrieve", {"path.id": "$response.body#/snapshot"}),
    Link("api_vertices_retrieve", "200", "api_jobs_retrieve", {"path.id": "$response.body#/job"}),
]


def add_links(result: dict, generator=None, request=None, public=None) -> dict:
    """drf-spectacular's postprocessing hook: ``result`` (the schema) with :data:`LINKS` in its
    responses' ``links``. Raises KeyError when a link names an operation or answer the schema lacks."""
    operations = {operation["operationId"]: operation for methods in result["paths"].values()
                  for operation in methods.values()}
    for link in LINKS:
        if link.target not in operations:
            raise KeyError(f"a link to an operation the schema lacks: {link.target}")
        links = operations[link.source]["responses"][link.status].setdefault("links", {})
        fields = [value.removeprefix("$response.body#/") for value in link.parameters.values()]
        definition = {"operationId": link.target, "parameters": link.parameters,
                      "description": f"{link.target} of this answer's {', '.join(fields)}."}
        if link.body is not None:
            definition["requestBody"] = link.body
        links[f"{link.target}_by_{'_'.join(fields)}"] = definition
    return result
