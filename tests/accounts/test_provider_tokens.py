"""Access tokens the identity provider issues, on the API: checked locally against the provider's
published keys (fetched once and cached), its issuer and the API audience."""

from typing import Any

import pytest
from django.test import Client, override_settings

from portal.accounts.models import GlobalRole, User
from tenants.models import Membership, Tenant
from tests.oidc.fixtures import sign_in_at_issuer, sso_configured
from tests.oidc.issuer import KeycloakIssuer, rsa_key

LEE = {
    "sub": "lee-sub",
    "preferred_username": "lee",
    "groups": ["/gpu-portal/tenants/vision/developers"],
}


def _me(token: str) -> tuple[int, dict[str, Any]]:
    response = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json()


def test_a_provider_access_token_works_on_the_api(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE

    status, body = _me(keycloak_issuer.mint())

    assert status == 200
    assert body["username"] == "lee"
    assert body["tenants"] == [{"slug": "vision", "name": tenant_a.name, "role": "developer"}]


def test_a_known_subject_is_the_user_who_signed_in_before(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    client = Client()
    sign_in_at_issuer(client)

    status, body = _me(keycloak_issuer.mint(preferred_username="renamed-in-token"))

    assert status == 200
    assert body["username"] == "lee"
    assert User.objects.count() == 1


def test_a_service_account_listed_in_api_clients_is_mapped_by_its_client_role(
    keycloak_issuer: KeycloakIssuer, db: None
) -> None:
    def token(*roles: str) -> str:
        return keycloak_issuer.mint(
            sub="svc-sub",
            azp="ci-bot",
            preferred_username="service-account-ci-bot",
            resource_access={"gpu-portal": {"roles": list(roles)}},
        )

    with override_settings(OIDC_API_CLIENTS=["gpu-portal", "ci-bot"]):
        status, body = _me(token("admin"))
        assert status == 200
        assert body["global_role"] == "admin"

        # The role is taken away in Keycloak: the next token says so, and it counts at once.
        status, body = _me(token("finance"))
        assert status == 200
        assert body["global_role"] == "finance"
        status, _ = _me(token())

    assert status == 401
    assert User.objects.get(username="service-account-ci-bot").global_role == GlobalRole.NONE


def test_a_token_issued_to_a_client_not_listed_is_401(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE

    response = Client().get(
        "/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {keycloak_issuer.mint(azp='kubernetes')}"
    )

    assert response.status_code == 401
    assert "issued to the client 'kubernetes'" in response.json()["error"]["message"]


def test_the_id_token_from_a_sign_in_is_not_an_api_credential(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    client = Client()
    sign_in_at_issuer(client)
    id_token = client.session["sso_id_token"]

    response = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {id_token}")

    assert response.status_code == 401
    assert "it is an ID token" in response.json()["error"]["message"]


def test_a_token_without_a_groups_claim_leaves_the_memberships_alone(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    assert _me(keycloak_issuer.mint())[0] == 200
    keycloak_issuer.user = {"sub": "lee-sub", "preferred_username": "lee"}

    status, body = _me(keycloak_issuer.mint(resource_access={"gpu-portal": {"roles": []}}))

    assert status == 200
    assert body["tenants"] == [{"slug": "vision", "name": tenant_a.name, "role": "developer"}]


def test_a_token_with_new_groups_changes_the_memberships(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    assert _me(keycloak_issuer.mint())[0] == 200

    status, body = _me(keycloak_issuer.mint(groups=["/gpu-portal/tenants/vision/leads"]))

    assert status == 200
    assert body["tenants"][0]["role"] == "lead"


@pytest.mark.parametrize(
    ("token_kwargs", "reason"),
    [
        ({"audience": "account"}, "another client (audience)"),
        ({"audience": ["account", "broker"]}, "another client (audience)"),
        ({"lifetime": -600}, "it has expired"),
        ({"iss": "http://127.0.0.1:1/realms/other"}, "another provider"),
    ],
)
def test_tokens_for_another_audience_expired_or_from_elsewhere_are_401(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant, token_kwargs, reason
) -> None:
    keycloak_issuer.user = LEE

    response = Client().get(
        "/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {keycloak_issuer.mint(**token_kwargs)}"
    )

    assert response.status_code == 401
    assert reason in response.json()["error"]["message"]
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert not Membership.objects.exists()


def test_a_token_signed_with_another_key_is_401(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    keycloak_issuer.signing_key = rsa_key("realm-key")

    status, _ = _me(keycloak_issuer.mint())

    assert status == 401


def test_a_list_audience_naming_the_api_is_accepted(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE

    status, _ = _me(keycloak_issuer.mint(audience=["account", "gpu-portal"]))

    assert status == 200


def test_keys_are_fetched_once_and_an_unknown_key_id_refetches_at_most_once_a_minute(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    for _ in range(3):
        assert _me(keycloak_issuer.mint())[0] == 200
    certs = "GET /realms/gpu-portal/protocol/openid-connect/certs"
    assert keycloak_issuer.requests.count(certs) == 1

    keycloak_issuer.signing_key = rsa_key("unknown-key")
    for _ in range(3):
        assert _me(keycloak_issuer.mint())[0] == 401

    assert keycloak_issuer.requests.count(certs) == 2


def test_rotated_keys_are_picked_up(keycloak_issuer: KeycloakIssuer, tenant_a: Tenant) -> None:
    keycloak_issuer.user = LEE
    assert _me(keycloak_issuer.mint())[0] == 200

    keycloak_issuer.key = rsa_key("rotated-key")

    assert _me(keycloak_issuer.mint())[0] == 200


def test_with_sso_off_only_personal_tokens_work(db: None) -> None:
    status, body = _me("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")

    assert status == 401
    assert "invalid token" in body["error"]["message"]


def test_a_provider_that_is_down_answers_401_not_500(db: None) -> None:
    with sso_configured("http://127.0.0.1:9/realms/nowhere"):
        status, body = _me("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")

    assert status == 401
    assert "could not be read" in body["error"]["message"]


def test_tokens_that_are_not_jwts_are_401(keycloak_issuer: KeycloakIssuer, db: None) -> None:
    status, _ = _me("not-a-jwt")

    assert status == 401


def test_an_inactive_users_provider_token_is_401(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    assert _me(keycloak_issuer.mint())[0] == 200
    User.objects.filter(username="lee").update(is_active=False)

    assert _me(keycloak_issuer.mint())[0] == 401


def test_bearer_requests_need_no_csrf_token(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant
) -> None:
    keycloak_issuer.user = LEE
    client = Client(enforce_csrf_checks=True)

    response = client.post(
        "/api/v1/requests/",
        {},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {keycloak_issuer.mint()}",
    )

    assert response.status_code == 400  # the body is checked, not a CSRF token
    assert "tenant" in response.json()["error"]["fields"]
