from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.keycloak.server import KeycloakDouble


@pytest.fixture
def portal_decides(keycloak_api: KeycloakDouble) -> Iterator[KeycloakDouble]:
    """The Keycloak double, with the portal deciding memberships (its changes are sent)."""
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        yield keycloak_api
