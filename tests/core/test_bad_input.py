"""Bad input of every class, sent to every write operation and list filter of the API and to a
few page forms: 400 naming the field (or parameter), nothing stored, and quickly.

The operations come from the OpenAPI schema, so a new endpoint is covered as soon as it is
declared; `test_every_write_operation_is_in_the_table` fails until WRITES says who may write
there and with which path parameters. The classes of bad input come from the fields' schema
types: control characters in any text, text beyond its limit, whole numbers beyond the column,
GPU-eq and money amounts a parser could choke on, JSON of the wrong type, unknown fields.
"""

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from tests.test_url_walk import walk_kwargs  # noqa: F401  (objects for every path parameter)

# Each call answers within this (the issue: one GPU-eq amount held a worker for 30 s). A bound
# on pathological work, not a speed target: a megabyte of text took 1.1 s on 2 busy cores.
TIME_LIMIT = 5.0

# Amounts that parse slowly, not at all, or beyond 64 bits, for GPU-eq and money fields alike.
BAD_AMOUNTS: tuple[Any, ...] = (
    "1e999999999", "1/1e99999", "1/0", "NaN", "Infinity", "-1", "1" + "0" * 30, 10**30,
    "9" * 5000, "1e-999999999", "0x10",
)  # fmt: skip
MULTILINE_FIELDS = frozenset({"comment", "reason", "justification", "description"})

# operation ("METHOD path") -> (persona, the walk's objects giving the path parameters)
WRITES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "POST /api/v1/clusters/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/clusters/{name}/": ("admin_user", lambda w: w["cluster"]),
    "POST /api/v1/directory/changes/{id}/retry": (
        "admin_user",
        lambda w: {"id": w["directory_change"]["pk"]},
    ),
    "POST /api/v1/directory/reconcile": ("admin_user", lambda _: {}),
    "POST /api/v1/extensions/{id}/approve": ("lead", lambda w: {"id": w["extension"]["pk"]}),
    "POST /api/v1/extensions/{id}/cancel": ("developer", lambda w: {"id": w["extension"]["pk"]}),
    "POST /api/v1/extensions/{id}/reject": ("lead", lambda w: {"id": w["extension"]["pk"]}),
    "POST /api/v1/gpu-models/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/me": ("developer", lambda _: {}),
    "PATCH /api/v1/gpu-models/{slug}/": ("admin_user", lambda w: w["gpu_model"]),
    "POST /api/v1/notebook-images/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/notebook-images/{slug}/": ("admin_user", lambda w: w["notebook_image"]),
    "POST /api/v1/notebooks/": ("developer", lambda _: {}),
    "POST /api/v1/notebooks/{id}/snooze": ("developer", lambda w: {"id": w["notebook"]["pk"]}),
    "POST /api/v1/notebooks/{id}/start": ("developer", lambda w: {"id": w["notebook"]["pk"]}),
    "POST /api/v1/notebooks/{id}/stop": ("developer", lambda w: {"id": w["notebook"]["pk"]}),
    "POST /api/v1/offerings/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/offerings/{slug}/": ("admin_user", lambda w: w["offering"]),
    "POST /api/v1/periods/{month}/close": ("finance_user", lambda w: w["api_period"]),
    "POST /api/v1/periods/{month}/reopen": ("admin_user", lambda w: w["api_period"]),
    "POST /api/v1/pools/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/pools/{cluster}/{name}/": ("admin_user", lambda w: w["pool"]),
    "POST /api/v1/provisioning-runs/{id}/retry": ("admin_user", lambda w: {"id": w["run"]["pk"]}),
    "POST /api/v1/rate-cards/": ("finance_user", lambda _: {}),
    "POST /api/v1/requests/": ("developer", lambda _: {}),
    "POST /api/v1/requests/preview": ("developer", lambda _: {}),
    "POST /api/v1/requests/{id}/approve": ("lead", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/requests/{id}/cancel": ("developer", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/requests/{id}/extend": ("lead", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/requests/{id}/reject": ("lead", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/requests/{id}/release": ("lead", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/requests/{id}/revoke": ("admin_user", lambda w: {"id": w["gpu_request"]["pk"]}),
    "POST /api/v1/tenants/": ("admin_user", lambda _: {}),
    "PATCH /api/v1/tenants/{slug}/": ("admin_user", lambda w: w["tenant"]),
    "PUT /api/v1/tenants/{slug}/budget/": ("finance_user", lambda w: w["tenant"]),
    "POST /api/v1/tenants/{slug}/members/": ("admin_user", lambda w: w["tenant"]),
    "POST /api/v1/tenants/{slug}/quota-requests/": ("lead", lambda w: w["tenant"]),
    "POST /api/v1/tenants/{slug}/quota-requests/{id}/approve": (
        "admin_user",
        lambda w: {"slug": w["quota_request"]["slug"], "id": w["quota_request"]["pk"]},
    ),
    "POST /api/v1/tenants/{slug}/quota-requests/{id}/reject": (
        "admin_user",
        lambda w: {"slug": w["quota_request"]["slug"], "id": w["quota_request"]["pk"]},
    ),
    "POST /api/v1/tokens/": ("developer", lambda _: {}),
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    fields: dict[str, dict[str, Any]]  # writable body fields and their schema
    parameters: dict[str, dict[str, Any]]  # query parameters and their schema

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, values: dict[str, Any]) -> str:
        return self.path.format(**values)


def _operations() -> list[Operation]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = components[node["$ref"].rpartition("/")[2]]
        if "allOf" in node and len(node["allOf"]) == 1:
            return resolve(node["allOf"][0])
        return node

    operations = []
    for path, items in schema["paths"].items():
        for method, operation in items.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            properties = resolve(body["schema"]).get("properties", {}) if body else {}
            fields = {
                name: resolve(field)
                for name, field in properties.items()
                if not field.get("readOnly")
            }
            parameters = {
                parameter["name"]: parameter.get("schema", {})
                for parameter in operation.get("parameters", [])
                if parameter["in"] == "query"
            }
            operations.append(Operation(method.upper(), path, fields, parameters))
    return operations


OPERATIONS = _operations()
WRITE_OPERATIONS = [op for op in OPERATIONS if op.method in ("POST", "PUT", "PATCH")]
FILTERED_OPERATIONS = [op for op in OPERATIONS if op.method == "GET" and op.parameters]


def _is_amount(name: str, field: dict[str, Any]) -> bool:
    """GPU-eq and money fields: strings the portal parses as numbers."""
    described = f"{field.get('description', '')} {field.get('pattern', '')}"
    return field.get("type") == "string" and (
        "GPU-eq" in described or r"\d" in described or name in ("amount", "gpu_eq")
    )


def bad_values(name: str, field: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(what, value) for each class of bad input that applies to a field of this schema."""
    kind = field.get("type", "string")
    multiline = name in MULTILINE_FIELDS
    yield "NUL", "a\x00b"
    yield "a control character", "a\x1bb"
    yield "DEL", "a\x7fb"
    if not multiline and kind == "string":
        yield "a tab", "a\tb"
        yield "a line break", "a\nb"
    if kind == "string":
        longest = field.get("maxLength", 100_000)
        yield "over-long text", "x" * (longest + 1)
        yield "a megabyte of text", "x" * 1_000_000
        yield "an object", {"a": 1}
    if _is_amount(name, field):
        for amount in BAD_AMOUNTS:
            yield f"the amount {str(amount)[:20]!r}", amount
    if kind == "integer":
        maximum = field.get("maximum", 2**63 - 1)
        yield "one beyond the maximum", maximum + 1
        yield "2^63", 2**63
        yield "10^30", 10**30
        if field.get("minimum", -1) >= 0:
            yield "-1", -1
        yield "a fraction", "1.5"
        yield "text", "many"
        yield "a list", [1]
    if kind == "boolean":
        yield "an object", {"a": 1}
    if kind == "object":
        yield "a NUL in a key", {"a\x00": "1"}
        yield "a NUL in a value", {"a": "b\x00"}
        yield "a list", [1]
    if kind == "array":
        yield "a NUL in an item", ["a\x00"]
        yield "an object", {"a": 1}


def table_rows() -> int:
    """Rows in every table of the project: one query."""
    tables = sorted({model._meta.db_table for model in apps.get_models()})
    # The names are the models' own tables, not input.
    union = " UNION ALL ".join(f'SELECT COUNT(*) AS n FROM "{table}"' for table in tables)  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT SUM(n) FROM ({union}) AS counts")  # noqa: S608
        return int(cursor.fetchone()[0])


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """What `call(*args, **kwargs)` answers, and how many seconds it took."""
    started = time.monotonic()
    response = call(*args, **kwargs)
    return response, time.monotonic() - started


def _send(client: Client, method: str, url: str, body: Any, **headers: str) -> Any:
    return getattr(client, method.lower())(
        url, data=json.dumps(body), content_type="application/json", headers=headers
    )


def test_every_write_operation_is_in_the_table() -> None:
    declared = {op.key for op in WRITE_OPERATIONS}
    assert declared - set(WRITES) == set(), "add these write operations to WRITES"
    assert set(WRITES) - declared == set(), "these WRITES are no longer in the schema"


@pytest.fixture
def send_bad(request: pytest.FixtureRequest, walk_kwargs: dict[str, Any]) -> Callable[..., Any]:  # noqa: F811
    """Sends bad input as the table's persona and checks the answer; returns the failures."""

    def send(op: Operation) -> list[str]:
        persona, path_values = WRITES[op.key]
        client = Client()
        client.force_login(request.getfixturevalue(persona))
        url = op.url(path_values(walk_kwargs))
        cases: list[tuple[str, str, Any]] = [
            (name, what, {name: value})
            for name, field in op.fields.items()
            for what, value in bad_values(name, field)
        ]
        cases.append(("zzz_unknown", "an unknown field", {"zzz_unknown": 1}))
        failures = []
        before = table_rows()
        for name, what, body in cases:
            response, took = _timed(_send, client, op.method, url, body)
            problem = _envelope_problem(response, name)
            if problem:
                failures.append(f"{op.key} {name} with {what}: {problem}")
            if took > TIME_LIMIT:
                failures.append(f"{op.key} {name} with {what}: took {took:.1f} s")
        if table_rows() != before:
            failures.append(f"{op.key}: bad input stored rows")
        return failures

    return send


def _envelope_problem(response: Any, name: str, *, status: int = 400) -> str | None:
    if response.status_code != status:
        return f"answered {response.status_code}: {response.content[:300]!r}"
    if response.headers.get("Content-Type", "").split(";")[0] != "application/json":
        return f"answered {response.headers.get('Content-Type')}, not the JSON envelope"
    error = response.json().get("error", {})
    if status == 400 and name not in error.get("fields", {}):
        return f"the envelope does not name {name!r}: {error}"
    return None


def test_bad_input_to_every_write_answers_400_naming_the_field_and_stores_nothing(
    send_bad: Callable[[Operation], list[str]], unthrottled: None
) -> None:
    # One test for all operations: the objects they write to take seconds to make.
    failures = [failure for op in WRITE_OPERATIONS for failure in send_bad(op)]
    assert failures == []


@pytest.mark.parametrize(
    "body", [[], "text", 7, None], ids=["a list", "a string", "a number", "null"]
)
def test_a_body_that_is_not_an_object_answers_400_even_with_an_idempotency_key(
    body: Any, developer, a100_tenant, client_for
) -> None:
    client = client_for(developer)
    before = table_rows()
    for headers in ({}, {"Idempotency-Key": "k-1"}):
        response = _send(client, "POST", "/api/v1/requests/", body, **headers)
        assert response.status_code == 400, response.content
        assert response.json()["error"]["code"] == "invalid"
    assert table_rows() == before


def test_an_idempotency_key_with_control_characters_answers_400(developer, client_for) -> None:
    response = _send(
        client_for(developer),
        "POST",
        "/api/v1/tokens/",
        {"name": "ci"},
        **{"Idempotency-Key": "k\x01y"},
    )
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["fields"]


# Query parameters: every GET operation with parameters, each parameter.

BAD_PARAMETERS = (
    ("NUL", "a\x00b"),
    ("a control character", "a\x1bb"),
    ("DEL", "a\x7fb"),
    ("a line break", "a\nb"),
)


def test_bad_query_parameters_answer_400_naming_the_parameter(
    admin_user,
    client_for,
    walk_kwargs: dict[str, Any],  # noqa: F811
) -> None:
    client = client_for(admin_user)
    values = {
        "slug": walk_kwargs["tenant"]["slug"],
        "id": walk_kwargs["gpu_request"]["pk"],
        "statement_id": walk_kwargs["api_statement"]["statement_id"],
    }
    failures = [
        failure for op in FILTERED_OPERATIONS for failure in _parameter_failures(client, op, values)
    ]
    assert failures == []


def _parameter_failures(client: Client, op: Operation, values: dict[str, Any]) -> list[str]:
    url = op.path.format(**values)
    failures = []
    for name in op.parameters:
        for what, value in BAD_PARAMETERS:
            response, took = _timed(client.get, url, {name: value})
            problem = _envelope_problem(response, name)
            if problem:
                failures.append(f"{op.key} ?{name}= {what}: {problem}")
            if took > TIME_LIMIT:
                failures.append(f"{op.key} ?{name}= {what}: took {took:.1f} s")
        # Numbers beyond a column or 64 bits: a list (a filter matching nothing), or 400 naming
        # the parameter, or 404 (a page beyond the last); never a server error.
        for value in (str(2**31), str(2**63 - 1), str(2**64), str(10**30), "-1"):
            response = client.get(url, {name: value})
            problem = _envelope_problem(response, name) if response.status_code == 400 else None
            if response.status_code >= 500 or problem:
                failures.append(f"{op.key} ?{name}={value}: answered {response.status_code}")
    return failures


def test_a_parameter_name_with_control_characters_is_refused(developer, client_for) -> None:
    response = client_for(developer).get("/api/v1/requests/", {"st\x00ate": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


# Path parameters.

ID_PATHS = sorted({op.path for op in OPERATIONS if "{id}" in op.path and "{slug}" not in op.path})


def test_an_id_beyond_any_row_answers_404(admin_user, client_for) -> None:
    client = client_for(admin_user)
    failures = []
    for path in ID_PATHS:
        for pk in (2**31, 2**63 - 1, 2**63, 10**30):
            url = path.format(id=pk)
            for method in ("get", "post"):
                response = getattr(client, method)(url, content_type="application/json")
                if response.status_code == 405:
                    continue
                problem = _envelope_problem(response, "id", status=404)
                if problem:
                    failures.append(f"{method.upper()} {url}: {problem}")
    assert failures == []


@pytest.mark.parametrize("value", ["a%00b", "a%01b", "a%7Fb", "a%09b"])
def test_control_characters_in_a_path_parameter_answer_400_or_404(
    value: str, admin_user, client_for, tenant_a
) -> None:
    client = client_for(admin_user)
    for url, name in (
        (f"/api/v1/tenants/{tenant_a.slug}/members/{value}/", "username"),
        (f"/api/v1/periods/{value}/close", "month"),
        (f"/api/v1/tenants/{value}/", None),
        (f"/api/v1/statements/{value}/", "statement_id"),
    ):
        response = client.delete(url) if "members" in url else client.get(url)
        if response.status_code == 405:
            response = client.post(url)
        assert response.status_code in (400, 404), (url, response.status_code)
        if response.status_code == 400:
            assert name in response.json()["error"]["fields"], url


def test_control_characters_in_a_page_query_answer_an_html_400(developer, client_for) -> None:
    response = client_for(developer).get("/audit/", {"actor": "a\x00b"})
    assert response.status_code == 400
    assert response.headers["Content-Type"].startswith("text/html")
    assert b"actor" in response.content


def test_a_page_id_beyond_bigint_answers_404(developer, client_for) -> None:
    response = client_for(developer).get(f"/notebooks/{10**30}/")
    assert response.status_code == 404


# Page forms: the same bounds, with the field's error on the form.


def _form_refused(response: Any, field: str) -> None:
    assert response.status_code == 400, response.content[:300]
    assert response.headers["Content-Type"].startswith("text/html")
    form = response.context["form"] if response.context and "form" in response.context else None
    if form is not None:
        assert field in form.errors, form.errors
    else:
        assert field.encode() in response.content


REQUEST = {"offering": "a100-80gb-whole", "count": "1"}
NOTEBOOK = {
    **REQUEST,
    "image": "pytorch",
    "cpu_cores": "4",
    "memory_gib": "16",
    "workspace_gib": "20",
}
NEW_TENANT = {"slug": "ok", "auto_approve_gpu_eq": "1"}
QUOTA_REQUEST = {"gpu_model": "a100-80gb", "amount": "1", "reason": "more"}

# (persona, page, a valid post, the field, its bad value); `{slug}` is the tenant's.
PAGE_FORMS: list[tuple[str, str, dict[str, str], str, str]] = [
    *(("admin_user", "/tenants/{slug}/quotas/", {"gpu_model": "a100-80gb"}, "gpu_eq", value)
      for value in ("1e999999999", "1/1e99999", "1" + "0" * 30, "NaN", "x" * 100_000, "1\x00")),
    ("lead", "/tenants/{slug}/quota-requests/", QUOTA_REQUEST, "reason", "x" * 100_000),
    ("lead", "/tenants/{slug}/quota-requests/", QUOTA_REQUEST, "reason", "a\x01b"),
    ("lead", "/tenants/{slug}/quota-requests/", QUOTA_REQUEST, "amount", "1e999999999"),
    ("developer", "/requests/new/", REQUEST, "count", str(2**31)),
    ("developer", "/requests/new/", REQUEST, "count", str(10**30)),
    ("developer", "/requests/new/", REQUEST, "duration_hours", str(2**63)),
    ("developer", "/requests/new/", REQUEST, "justification", "x" * 100_000),
    ("developer", "/notebooks/new/", NOTEBOOK, "cpu_cores", "1e999999999"),
    ("developer", "/notebooks/new/", NOTEBOOK, "cpu_cores", "NaN"),
    ("developer", "/notebooks/new/", NOTEBOOK, "memory_gib", str(10**30)),
    ("admin_user", "/manage/tenants/new/", NEW_TENANT, "name", "A\tB"),
]  # fmt: skip


def _form_problem(response: Any, field: str) -> str | None:
    if response.status_code != 400:
        return f"answered {response.status_code}"
    if not response.headers["Content-Type"].startswith("text/html"):
        return f"answered {response.headers['Content-Type']}"
    context = response.context
    form = context["form"] if context is not None and "form" in context else None
    if form is not None and field not in form.errors:
        return f"the form's errors do not name {field}: {form.errors}"
    if form is None and field.encode() not in response.content:
        return f"the error page does not name {field}"
    return None


def test_page_forms_answer_400_with_the_fields_error_and_store_nothing(
    request: pytest.FixtureRequest, a100_tenant, client_for
) -> None:
    failures = []
    for persona, page, valid, field, value in PAGE_FORMS:
        client = client_for(request.getfixturevalue(persona))
        data = {"tenant": a100_tenant.slug, **valid, field: value}
        before = table_rows()
        url = page.format(slug=a100_tenant.slug)
        response, took = _timed(client.post, url, data, headers={"HX-Request": "true"})
        problem = _form_problem(response, field)
        if problem:
            failures.append(f"{page} {field}={value[:20]!r}: {problem}")
        if took > TIME_LIMIT:
            failures.append(f"{page} {field}={value[:20]!r}: took {took:.1f} s")
        if table_rows() != before:
            failures.append(f"{page} {field}={value[:20]!r}: stored rows")
    assert failures == []
