"""The OpenAPI schema's error answers, documented once for every operation.

Every error the API gives is the envelope `{"error": {"code", "message", "fields"}}`
(portal.core.api), whichever status it comes with. Rather than each view listing its errors,
`document_errors` (a drf-spectacular postprocessing hook, SPECTACULAR_SETTINGS) adds the
`Error` component and, to each operation, the statuses that its shape allows (API.md):

- 401 and 429 on every operation that needs a signed-in caller;
- 404 where something may not be visible: a path that names an object, a page number that is
  not there, a filter that names a tenant, a surface kept for admins or finance (every
  authenticated operation but those in NEVER_HIDDEN);
- 403 where a visible object or action may be refused: writes, and reads of a named object
  or a download;
- 400 on bad input: a body, query parameters or path parameters to read;
- 409 on writes (a state that does not allow it, a name taken, an Idempotency-Key reused
  with another body);
- 413 on operations that take a body.

Bodies are closed: a write refuses fields it does not take (portal.core.serializers), so each
body's component (its own, `...Request`, with COMPONENT_SPLIT_REQUEST) says
`additionalProperties: false`.

A status a view declares itself (`extend_schema(responses=...)`, e.g. 422 where policy can
refuse) is kept as it is; the hook only adds what is missing.
"""

from typing import Any

from drf_spectacular.utils import OpenApiResponse

ERROR_COMPONENT = "Error"
ERROR_REF = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every error answer of the API.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "What went wrong, for programs: e.g. invalid, not_found, "
                    "forbidden, conflict, invalid_transition, quota_exceeded, "
                    "refused_by_policy, not_authenticated, throttled.",
                },
                "message": {"type": "string", "description": "What went wrong, for people."},
                "fields": {
                    "type": "object",
                    "description": "Each input field (or query parameter, or header) at fault "
                    "with its messages; empty when no field is to blame.",
                    "additionalProperties": {},
                },
            },
            "required": ["code", "message", "fields"],
        },
    },
    "required": ["error"],
}

DESCRIPTIONS = {
    400: "Bad input; `fields` names each parameter or field at fault.",
    401: "Not signed in, or the Bearer token is unknown, expired or revoked.",
    403: "Visible to the caller, but not theirs to do.",
    404: "Not there, or not visible to the caller.",
    409: "Conflicts with the current state: an invalid transition, a quota exceeded, a name "
    "taken, or an Idempotency-Key used before with another body.",
    413: "The request body is larger than the API accepts.",
    422: "Well-formed, but refused by policy.",
    429: "Too many requests; `Retry-After` says how many seconds to wait.",
}
RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer"},
        "description": "Seconds to wait before trying again.",
    }
}
WRITES = frozenset({"post", "put", "patch", "delete"})
# Operations about the caller alone, with nothing to look up: never a 404.
NEVER_HIDDEN = frozenset({"me_retrieve", "tokens_create"})


def documented_error(status: int) -> OpenApiResponse:
    """The `Error` answer for `status`, for a view that declares a status the rules above do
    not give it: `extend_schema(responses={200: ..., 422: documented_error(422)})`."""
    return OpenApiResponse(ERROR_REF, description=DESCRIPTIONS[status])


def _authenticated(operation: dict[str, Any], default_security: list[Any]) -> bool:
    security = operation.get("security", default_security)
    return bool(security) and {} not in security


def error_statuses(method: str, operation: dict[str, Any], *, authenticated: bool) -> set[int]:
    """The error statuses that `operation` (called with `method`) can answer."""
    parameters = operation.get("parameters", [])
    in_path = any(parameter["in"] == "path" for parameter in parameters)
    in_query = {parameter["name"] for parameter in parameters if parameter["in"] == "query"}
    body = "requestBody" in operation
    write = method in WRITES
    statuses: set[int] = set()
    if body or parameters:
        statuses.add(400)
    if authenticated:
        statuses |= {401, 429}
        if operation.get("operationId") not in NEVER_HIDDEN:
            statuses.add(404)
        if write or in_path or "format" in in_query:
            statuses.add(403)
    if write:
        statuses.add(409)
    if body:
        statuses.add(413)
    return statuses


def _close_body(operation: dict[str, Any], components: dict[str, Any]) -> None:
    for media in operation.get("requestBody", {}).get("content", {}).values():
        name = media.get("schema", {}).get("$ref", "").rpartition("/")[2]
        if name in components:
            components[name]["additionalProperties"] = False


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the `Error` component, each operation's error
    answers with it, and closed bodies (see the module's docstring)."""
    default_security = result.get("security", [])
    components = result.setdefault("components", {}).setdefault("schemas", {})
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            _close_body(operation, components)
            authenticated = _authenticated(operation, default_security)
            responses = operation["responses"]
            for status in sorted(error_statuses(method, operation, authenticated=authenticated)):
                if str(status) in responses:
                    continue
                response: dict[str, Any] = {
                    "description": DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": ERROR_REF}},
                }
                if status == 429:
                    response["headers"] = RETRY_AFTER
                responses[str(status)] = response
            operation["responses"] = dict(sorted(responses.items()))
    components[ERROR_COMPONENT] = ERROR_SCHEMA
    result["components"]["schemas"] = dict(sorted(components.items()))
    return result
