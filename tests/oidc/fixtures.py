"""Single sign-on in the tests: the portal pointed at a real OIDC provider (oidc-provider-mock)
or at the Keycloak-shaped issuer double, and the browserless sign-in through either."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.test import Client, override_settings

from portal.accounts.oidc import forget_provider
from tests.oidc.issuer import CLIENT_ID, CLIENT_SECRET, KeycloakIssuer, keycloak_issuer_running


@contextmanager
def sso_configured(issuer_url: str, **extra: Any) -> Iterator[None]:
    """Settings as a deployment with SSO on would have them (the provider caches dropped)."""
    forget_provider()
    with override_settings(
        SSO_ENABLED=True,
        OIDC_ISSUER_URL=issuer_url,
        OIDC_CLIENT_ID=CLIENT_ID,
        OIDC_CLIENT_SECRET=CLIENT_SECRET,
        OIDC_API_AUDIENCE=CLIENT_ID,
        OIDC_API_CLIENTS=[CLIENT_ID],
        **extra,
    ):
        yield
    forget_provider()


def callback_path(location: str) -> str:
    """The portal-relative part of the provider's redirect back (path and query)."""
    parts = urlsplit(location)
    return f"{parts.path}?{parts.query}"


def sign_in_at_issuer(client: Client) -> Any:
    """Sign in at the issuer double, which signs its `user` in at once: the portal's answer."""
    start = client.get("/accounts/oidc/login/")
    back = requests.get(start["Location"], allow_redirects=False, timeout=5)
    assert back.status_code == 302, back.text
    return client.get(callback_path(back.headers["Location"]))


@dataclass
class MockProvider:
    """The real provider (oidc-provider-mock): people's claims, and a sign-in without a browser."""

    url: str

    def set_user(self, sub: str, **claims: Any) -> None:
        response = requests.put(f"{self.url}/users/{sub}", json=claims, timeout=5)
        response.raise_for_status()

    def start(self, client: Client, next_url: str = "") -> str:
        """Begin a sign-in in the portal; returns the provider's authorization URL."""
        query = f"?next={next_url}" if next_url else ""
        response = client.get(f"/accounts/oidc/login/{query}")
        assert response.status_code == 302, response
        assert response["Location"].startswith(self.url)
        return str(response["Location"])

    def authorize(self, authorization_url: str, sub: str) -> str:
        """The person picks `sub` at the provider; returns the redirect back to the portal."""
        response = requests.post(
            authorization_url, data={"sub": sub}, allow_redirects=False, timeout=5
        )
        assert response.status_code == 302, response.text
        return callback_path(response.headers["Location"])

    def sign_in(self, client: Client, sub: str, next_url: str = "") -> Any:
        return client.get(self.authorize(self.start(client, next_url), sub))


@pytest.fixture
def mock_provider(oidc_provider: str) -> Iterator[MockProvider]:
    """The portal signing in at the real OIDC provider."""
    with sso_configured(oidc_provider):
        yield MockProvider(oidc_provider)


@pytest.fixture
def keycloak_issuer() -> Iterator[KeycloakIssuer]:
    """The portal signing in at the Keycloak-shaped issuer double."""
    with keycloak_issuer_running() as issuer, sso_configured(issuer.issuer):
        yield issuer
