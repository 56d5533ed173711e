"""The `keycloak_api` fixture: the Keycloak admin API double, with the portal pointed at it."""

from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.keycloak.server import KeycloakDouble


@pytest.fixture
def keycloak_api() -> Iterator[KeycloakDouble]:
    """A running double of one Keycloak realm, and the directory sync on, aimed at it. The
    memberships' source stays the settings' (identity-provider unless a test says otherwise)."""
    with (
        KeycloakDouble() as double,
        override_settings(
            KEYCLOAK_SYNC=True,
            KEYCLOAK_SERVER_URL=double.url,
            KEYCLOAK_REALM=double.realm,
            KEYCLOAK_ADMIN_CLIENT_ID=double.client_id,
            KEYCLOAK_ADMIN_CLIENT_SECRET=double.client_secret,
            OIDC_TIMEOUT_SECONDS=5,
        ),
    ):
        yield double
    # A request the double failed on or does not serve is a gap in the double, not a bug in
    # the code under test: say so rather than let the test pass or fail on it.
    if double.server_errors:
        pytest.fail("the Keycloak double failed internally:\n" + "\n".join(double.server_errors))
