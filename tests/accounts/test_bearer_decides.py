"""A request that carries `Authorization: Bearer` is judged by that token alone: a browser
session sent along never rescues a bad token, nor changes whose request a good one is."""

import pytest
from django.test import Client

from portal.accounts.models import User
from portal.accounts.tokens import api_token_create, api_token_revoke

CHALLENGE = 'Bearer realm="api"'


def signed_in_with_token(session_user: User, token_text: str) -> Client:
    """A browser signed in as `session_user` that also sends `token_text` as its bearer."""
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_text}")
    client.force_login(session_user)
    return client


def test_a_revoked_token_beside_a_valid_session_is_401(developer) -> None:
    issued = api_token_create(actor=developer, name="ci")
    api_token_revoke(actor=developer, token=issued.token)
    client = signed_in_with_token(developer, issued.text)

    response = client.get("/api/v1/me")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == CHALLENGE
    assert response.json()["error"]["code"] == "authentication_failed"


@pytest.mark.parametrize("token_text", ["gpp_" + "x" * 43, "not-a-token", "two words"])
def test_an_unknown_or_malformed_token_beside_a_valid_session_is_401(developer, token_text) -> None:
    response = signed_in_with_token(developer, token_text).get("/api/v1/me")

    assert response.status_code == 401


def test_a_revoked_token_beside_a_valid_session_cannot_write(developer, a100_tenant) -> None:
    issued = api_token_create(actor=developer, name="ci")
    api_token_revoke(actor=developer, token=issued.token)
    client = signed_in_with_token(developer, issued.text)

    response = client.post(
        "/api/v1/tokens/", {"name": "sneaky", "expires_in_days": 7}, content_type="application/json"
    )

    assert response.status_code == 401
    assert not developer.api_tokens.filter(name="sneaky").exists()


def test_a_valid_token_beside_another_users_session_answers_as_the_tokens_owner(
    developer, lead
) -> None:
    issued = api_token_create(actor=lead, name="ci")

    response = signed_in_with_token(developer, issued.text).get("/api/v1/me")

    assert response.status_code == 200
    assert response.json()["username"] == "lead"


def test_without_a_bearer_token_the_session_still_signs_in(client_for, developer) -> None:
    response = client_for(developer).get("/api/v1/me")

    assert response.status_code == 200
    assert response.json()["username"] == "dev"
