"""The realm a Keycloak admin imports (deploy/keycloak/realm-export.json) agrees with what the
portal expects of the tokens and of the directory sync's service account."""

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.urls import reverse

from portal.accounts.groups import tenant_group

EXPORT = Path(settings.BASE_DIR) / "deploy" / "keycloak" / "realm-export.json"


@pytest.fixture(scope="module")
def realm() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(EXPORT.read_text())
    return loaded


def client(realm: dict[str, Any], client_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in realm["clients"] if c["clientId"] == client_id]
    assert len(found) == 1, client_id
    return found[0]


def mapper(found: dict[str, Any], kind: str) -> dict[str, str]:
    configs: list[dict[str, str]] = [
        m["config"] for m in found["protocolMappers"] if m["protocolMapper"] == kind
    ]
    assert len(configs) == 1, kind
    return configs[0]


def in_every_token(config: dict[str, str]) -> bool:
    return all(config[f"{where}.token.claim"] == "true" for where in ("id", "access", "userinfo"))


def test_the_portal_client_signs_in_with_the_code_flow_and_pkce(realm):
    portal = client(realm, "gpu-portal")
    assert realm["realm"] == "gpu-portal"
    assert (portal["publicClient"], portal["standardFlowEnabled"]) == (False, True)
    assert portal["directAccessGrantsEnabled"] is False
    assert portal["attributes"]["pkce.code.challenge.method"] == "S256"
    [redirect] = portal["redirectUris"]
    assert (
        urlsplit(redirect).path == reverse("accounts:oidc-callback") == "/accounts/oidc/callback/"
    )
    assert portal["attributes"]["post.logout.redirect.uris"] == "https://gpu-portal.example.org/*"


def test_the_tokens_carry_the_claims_the_portal_reads(realm):
    portal = client(realm, "gpu-portal")
    groups = mapper(portal, "oidc-group-membership-mapper")
    assert groups["claim.name"] == settings.OIDC_GROUPS_CLAIM == "groups"
    assert groups["full.path"] == "true"
    assert in_every_token(groups)

    roles = mapper(portal, "oidc-usermodel-client-role-mapper")
    assert roles["usermodel.clientRoleMapping.clientId"] == "gpu-portal"
    assert roles["multivalued"] == "true"
    assert in_every_token(roles)
    # Keycloak fills in ${client_id}; the portal's default fills in {client_id} the same way.
    claim = roles["claim.name"]
    assert claim == "resource_access.${client_id}.roles"
    assert claim.replace("${client_id}", "{client_id}") == settings.OIDC_ROLES_CLAIM

    names = {role["name"] for role in realm["roles"]["client"]["gpu-portal"]}
    assert names == {settings.OIDC_ADMIN_ROLE, settings.OIDC_FINANCE_ROLE} == {"admin", "finance"}

    audience = mapper(portal, "oidc-audience-mapper")
    assert audience["included.client.audience"] == "gpu-portal"
    assert audience["access.token.claim"] == "true"


def test_kubectl_signs_in_as_a_public_client_with_the_same_groups(realm):
    kubernetes = client(realm, "kubernetes")
    assert kubernetes["publicClient"] is True
    assert mapper(kubernetes, "oidc-group-membership-mapper") == mapper(
        client(realm, "gpu-portal"), "oidc-group-membership-mapper"
    )


def test_the_sync_client_has_only_client_credentials_and_the_roles_it_needs(realm):
    sync = client(realm, "gpu-portal-sync")
    assert sync["serviceAccountsEnabled"] is True
    assert sync["publicClient"] is False
    assert (sync["standardFlowEnabled"], sync["directAccessGrantsEnabled"]) == (False, False)
    [account] = [u for u in realm["users"] if u.get("serviceAccountClientId") == "gpu-portal-sync"]
    assert sorted(account["clientRoles"]["realm-management"]) == [
        "manage-users", "query-groups", "query-users", "view-users",
    ]  # fmt: skip


def test_the_tenant_groups_live_under_the_imported_group(realm):
    [top] = realm["groups"]
    [tenants] = top["subGroups"]
    assert tenants["path"] == "/gpu-portal/tenants"
    group = tenant_group(settings.PORTAL_TENANT_GROUP, "vision", "lead")
    assert group == "/gpu-portal/tenants/vision/leads"
    assert group.startswith(tenants["path"] + "/")
