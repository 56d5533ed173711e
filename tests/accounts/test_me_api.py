from django.test import Client


def test_anonymous_callers_get_401_in_the_error_envelope(client: Client, db) -> None:
    response = client.get("/api/v1/me")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_me_describes_the_caller_and_their_tenants(client_for, lead, tenant_a) -> None:
    response = client_for(lead).get("/api/v1/me")

    assert response.status_code == 200
    body = response.json()
    assert body["username"] == "lead"
    assert body["persona"] == "lead"
    assert body["global_role"] == ""
    assert body["tenants"] == [{"slug": "vision", "name": tenant_a.name, "role": "lead"}]


def test_me_answers_with_and_without_a_trailing_slash(client_for, lead) -> None:
    client = client_for(lead)

    without, with_slash = client.get("/api/v1/me"), client.get("/api/v1/me/")

    assert without.status_code == with_slash.status_code == 200
    assert with_slash.json() == without.json()


def test_me_with_a_trailing_slash_is_not_documented_twice(client_for, developer) -> None:
    schema = client_for(developer).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )

    assert "/api/v1/me" in schema.json()["paths"]
    assert "/api/v1/me/" not in schema.json()["paths"]


def test_me_shows_global_roles(client_for, finance_user) -> None:
    body = client_for(finance_user).get("/api/v1/me").json()

    assert body["global_role"] == "finance"
    assert body["tenants"] == []


def test_the_openapi_schema_and_docs_are_served(client_for, developer) -> None:
    client = client_for(developer)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    docs = client.get("/api/docs/")

    assert schema.status_code == 200
    assert "/api/v1/me" in schema.json()["paths"]
    assert docs.status_code == 200
    assert "swagger-ui" in docs.text
