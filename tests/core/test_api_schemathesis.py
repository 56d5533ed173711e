"""Schemathesis over the whole API, as each persona, against a live server.

The schema at /api/schema/ is the contract: every answer of every operation, to whoever calls
it with whatever input, must be one its schema declares (status, content type, body), and none
may be a server error. Schemathesis generates the inputs (valid and invalid) from the schema
itself, then, in its stateful phase, chains operations along the links it finds between them
(a request created, then read, approved, released).

Each persona calls with a personal API token as a Bearer header, as automation does. The
number of examples per operation is bounded and the generation derandomized with a fixed
seed, so a run takes the same inputs every time and stays within the suite's time. One test
runs every persona in turn (a subtest each), so the people and the catalog are made once.
"""

from collections.abc import Callable
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from schemathesis import APIOperation, BaseSchema, Case
from schemathesis.core.failures import FailureGroup, as_reported_failure
from schemathesis.core.result import Ok
from schemathesis.pytest.lazy import get_all_tests

from portal.accounts.models import ApiToken, User
from portal.accounts.tokens import IssuedToken, api_token_create
from tenants.models import Tenant

# What the run checks and how much it tries, in schemathesis.toml's format.
CONFIG = """
seed = 17

[generation]
max-examples = 6
deterministic = true
database = "none"
no-shrink = true

[checks]
enabled = false
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true

[phases]
examples.enabled = true
coverage.enabled = false
fuzzing.enabled = true
stateful.enabled = true
stateful.max-steps = 6
"""
STATEFUL_SCENARIOS = 8

# The admin goes last: what it changes (tenants archived, quotas, members) would otherwise
# leave the others little to work on.
PERSONAS = ("outsider", "developer", "lead", "finance_user", "admin_user")

Bearer = Callable[[], dict[str, str]]
AnyCase = Case[APIOperation[Any, Any, Any, Any]]


@pytest.fixture(scope="session")
def schema_document(live_server) -> dict[str, Any]:
    """The live server's schema, read once: it describes the API, not anyone's data."""
    answer = requests.get(
        f"{live_server.url}/api/schema/",
        headers={"Accept": "application/vnd.oai.openapi+json"},
        timeout=60,
    )
    answer.raise_for_status()
    document: dict[str, Any] = answer.json()
    return document


@pytest.fixture
def world(
    developer, lead, outsider, finance_user, admin_user, a100_tenant: Tenant, tenant_b
) -> Tenant:
    """Everyone, the GPU catalog and tenant A with an A100 quota, for the API to work on."""
    return a100_tenant


def _bearer(persona: User) -> Bearer:
    """The persona's Authorization header. An operation under test may revoke the very token
    it is called with (`DELETE tokens/{id}/`): the next call then gets a fresh one, so the rest
    of the run is not all 401s."""
    current: list[IssuedToken] = []

    def header() -> dict[str, str]:
        token = current[-1].token if current else None
        if token is None or not ApiToken.objects.filter(pk=token.pk, revoked_at=None).exists():
            current.append(api_token_create(actor=persona, name="schemathesis", expires_in_days=1))
        return {"Authorization": f"Bearer {current[-1].text}"}

    return header


@pytest.fixture
def bearers(request: pytest.FixtureRequest, world: Tenant, unthrottled: None) -> dict[str, Bearer]:
    """Each persona's Authorization header, in PERSONAS' order."""
    return {name: _bearer(request.getfixturevalue(name)) for name in PERSONAS}


@pytest.fixture
def api_schema(live_server, schema_document: dict[str, Any]) -> BaseSchema:
    schema = schemathesis.openapi.from_dict(
        schema_document, config=schemathesis.Config.from_str(CONFIG)
    )
    schema.config.update(base_url=live_server.url)
    return schema


def _caller(bearer: Bearer) -> Callable[[AnyCase], None]:
    def call(case: AnyCase) -> None:
        case.call_and_validate(headers=bearer())

    return call


def test_every_operation_answers_as_its_schema_says_to_every_persona(
    api_schema: BaseSchema, bearers: dict[str, Bearer], subtests: pytest.Subtests
) -> None:
    for name, bearer in bearers.items():
        # schemathesis.pytest.from_fixture does what this loop does, but renames the pytest
        # node through an attribute pytest 9.2 no longer has; its builder is used directly.
        built = list(
            get_all_tests(
                schema=api_schema, test_func=_caller(bearer), settings=None, given_kwargs={}
            )
        )
        assert len(built) >= 70, "the schema lost its operations"
        for result in built:
            assert isinstance(result, Ok), result.err()
            operation, test = result.ok()
            with subtests.test(msg=f"{name}: {operation.label}"):
                try:
                    test()
                except FailureGroup as failures:
                    raise as_reported_failure(failures) from None


def test_chained_operations_answer_as_their_schema_says_to_every_persona(
    api_schema: BaseSchema, bearers: dict[str, Bearer], subtests: pytest.Subtests
) -> None:
    workflow = api_schema.as_state_machine()
    links = [
        name
        for name in dir(workflow)
        if hasattr(getattr(workflow, name), "hypothesis_stateful_rule")
    ]
    assert len(links) >= 20, "schemathesis found few links between operations to follow"
    settings = hypothesis.settings(
        api_schema.config.get_hypothesis_settings(phase="stateful"),
        max_examples=STATEFUL_SCENARIOS,
    )
    for name, bearer in bearers.items():

        class Scenarios(workflow):  # type: ignore[misc,valid-type]
            def get_call_kwargs(self, case: AnyCase, bearer: Bearer = bearer) -> dict[str, Any]:
                return {"headers": bearer()}

        with subtests.test(msg=name):
            try:
                Scenarios.run(settings=settings)
            except FailureGroup as failures:
                raise as_reported_failure(failures) from None
