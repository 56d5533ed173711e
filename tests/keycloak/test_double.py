"""The Keycloak double answers as Keycloak's admin API does where the gateway relies on it."""

import requests

from tests.keycloak.server import KeycloakDouble


def token(double: KeycloakDouble, secret: str) -> requests.Response:
    return requests.post(
        f"{double.url}/realms/{double.realm}/protocol/openid-connect/token",
        data={"grant_type": "client_credentials", "client_id": double.client_id,
              "client_secret": secret},
        timeout=5,
    )  # fmt: skip


def test_the_admin_api_wants_a_token_from_the_client_credentials_grant():
    with KeycloakDouble() as double:
        groups = f"{double.url}/admin/realms/{double.realm}/groups"
        assert requests.post(groups, json={"name": "x"}, timeout=5).status_code == 401
        assert token(double, "wrong").json()["error"] == "unauthorized_client"
        bearer = {
            "Authorization": f"Bearer {token(double, double.client_secret).json()['access_token']}"
        }
        created = requests.post(groups, json={"name": "x"}, headers=bearer, timeout=5)
        assert created.status_code == 201
        assert created.headers["Location"].startswith(groups + "/")
        again = requests.post(groups, json={"name": "x"}, headers=bearer, timeout=5)
        assert again.status_code == 409
        assert double.server_errors == []


def test_an_outage_answers_every_request_503():
    with KeycloakDouble() as double:
        double.outage = True
        assert token(double, double.client_secret).status_code == 503
        assert len(double.requests) == 1
