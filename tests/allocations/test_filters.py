"""One FilterSet for the request lists: the pages and `GET requests/` read the same parameters,
a bad value is shown beside its field on a page and answers 400 naming it in the API, and the
schema lists the parameters."""

from portal.allocations.services import gpu_request_submit


def submit(developer, tenant, offering, count):
    return gpu_request_submit(actor=developer, tenant=tenant, offering=offering, count=count)


def test_all_requests_filters_by_state_and_shows_a_bad_state_beside_the_field(
    client_for, admin_user, developer, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    approved = submit(developer, a100_tenant, whole, 1)
    pending = submit(developer, a100_tenant, whole, 2)
    client = client_for(admin_user)

    only_pending = client.get("/manage/requests/", {"state": "pending"}).text
    bad = client.get("/manage/requests/", {"state": "lost"})

    assert f"<td>{pending.pk}</td>" in only_pending
    assert f"<td>{approved.pk}</td>" not in only_pending
    assert bad.status_code == 200
    assert "State: Unknown state." in bad.text


def test_the_approvals_queue_sorts_newest_first_when_asked(
    client_for, lead, developer, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    first, second = (submit(developer, a100_tenant, whole, count) for count in (2, 3))

    text = client_for(lead).get("/approvals/", {"sort": "newest"}).text

    assert text.index(f'data-testid="pending-{second.pk}"') < text.index(
        f'data-testid="pending-{first.pk}"'
    )


def test_the_api_filters_with_the_same_parameters_and_names_a_bad_one(
    client_for, lead, developer, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    submit(developer, a100_tenant, whole, 1)
    pending = submit(developer, a100_tenant, whole, 2)
    client = client_for(lead)

    listed = client.get("/api/v1/requests/", {"state": "pending", "tenant": "vision"}).json()
    mine = client.get("/api/v1/requests/", {"mine": "true"}).json()
    bad = client.get("/api/v1/requests/", {"state": "lost"})

    assert [row["id"] for row in listed["results"]] == [pending.pk]
    assert mine["count"] == 0  # the lead asked for nothing
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid"
    assert bad.json()["error"]["fields"] == {"state": ["Unknown state."]}


def test_the_schema_lists_the_request_filters(client_for, developer) -> None:
    schema = (
        client_for(developer)
        .get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
        .json()
    )

    parameters = {
        parameter["name"]: parameter
        for parameter in schema["paths"]["/api/v1/requests/"]["get"]["parameters"]
    }

    assert {"state", "tenant", "mine", "sort", "page", "page_size"} <= set(parameters)
    assert "pending" in parameters["state"]["schema"]["enum"]
    assert parameters["mine"]["schema"]["type"] == "boolean"
    assert "/api/v1/requests/preview" in schema["paths"]
