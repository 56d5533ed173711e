"""Signing in through OpenID Connect: a real provider (oidc-provider-mock) for the full flow, and
the Keycloak-shaped issuer double where a token must be bent (audience, key, PKCE)."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client, override_settings
from oidc_provider_mock import run_server_in_thread

from portal.accounts.models import GlobalRole, SsoProfile, User
from portal.accounts.services import user_create
from portal.core.models import AuditEvent
from tenants.models import MemberRole, Membership, Tenant
from tenants.services import tenant_change_state, tenant_create
from tests.conftest import PASSWORD
from tests.loaded import page_loaded
from tests.oidc.fixtures import MockProvider, sign_in_at_issuer, sso_configured
from tests.oidc.issuer import KeycloakIssuer, rsa_key

VISION_LEADS = "/gpu-portal/tenants/vision/leads"
VISION_DEVELOPERS = "/gpu-portal/tenants/vision/developers"
NLP_DEVELOPERS = "/gpu-portal/tenants/nlp/developers"


def _roles(*roles: str) -> dict[str, object]:
    return {"resource_access": {"gpu-portal": {"roles": list(roles)}}}


def _lee(provider: MockProvider, *groups: str, **claims: object) -> None:
    provider.set_user(
        "lee-sub",
        preferred_username="lee",
        email="lee@example.org",
        given_name="Lee",
        family_name="Park",
        groups=list(groups),
        **claims,
    )


def test_a_user_in_the_leads_group_signs_in_as_a_lead_of_that_tenant(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, VISION_LEADS)
    client = Client()

    response = mock_provider.sign_in(client, "lee-sub")

    assert response.status_code == 302
    assert response["Location"] == "/home/"
    user = User.objects.get(username="lee")
    assert user.get_full_name() == "Lee Park"
    assert Membership.objects.get(user=user).role == MemberRole.LEAD
    assert client.get("/team/").status_code == 200
    assert SsoProfile.objects.get(user=user).groups == [VISION_LEADS]


def test_removed_from_the_group_the_next_sign_in_drops_the_membership(
    mock_provider: MockProvider, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    _lee(mock_provider, VISION_LEADS, NLP_DEVELOPERS)
    mock_provider.sign_in(Client(), "lee-sub")
    lee = User.objects.get(username="lee")
    assert dict(Membership.objects.filter(user=lee).values_list("tenant__slug", "role")) == {
        "vision": "lead",
        "nlp": "developer",
    }

    _lee(mock_provider, NLP_DEVELOPERS)
    response = mock_provider.sign_in(Client(), "lee-sub")

    assert response["Location"] == "/home/"
    assert list(Membership.objects.filter(user=lee).values_list("tenant__slug", "role")) == [
        ("nlp", "developer")
    ]
    removal = AuditEvent.objects.get(action="membership.remove")
    assert removal.tenant == tenant_a
    assert removal.actor is None
    mapping = AuditEvent.objects.filter(action="user.sso_mapping").latest("id")
    assert mapping.changes["memberships"] == [
        {"nlp": "developer", "vision": "lead"},
        {"nlp": "developer"},
    ]


def test_client_roles_become_global_roles_and_are_taken_away_again(
    mock_provider: MockProvider, db: None
) -> None:
    _lee(mock_provider, **_roles("finance"))
    assert mock_provider.sign_in(Client(), "lee-sub")["Location"] == "/home/"
    assert User.objects.get(username="lee").global_role == GlobalRole.FINANCE

    _lee(mock_provider, **_roles("admin", "finance"))
    assert mock_provider.sign_in(Client(), "lee-sub")["Location"] == "/home/"
    lee = User.objects.get(username="lee")
    assert lee.global_role == GlobalRole.ADMIN
    assert (lee.is_staff, lee.is_superuser) == (True, True)

    _lee(mock_provider, VISION_DEVELOPERS, **_roles())
    response = mock_provider.sign_in(Client(), "lee-sub")
    lee.refresh_from_db()
    assert lee.global_role == GlobalRole.NONE
    assert (lee.is_staff, lee.is_superuser) == (False, False)
    # vision does not exist: no access, and a page that says so
    assert response.status_code == 403
    assert "No access yet" in response.text
    assert VISION_DEVELOPERS in response.text


def test_a_user_whose_claims_map_to_nothing_gets_a_clear_page_and_no_session(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, "/staff/everyone")
    client = Client()

    response = mock_provider.sign_in(client, "lee-sub")

    assert response.status_code == 403
    assert "You signed in as <strong>lee</strong>" in response.text
    assert "/gpu-portal/tenants/vision/developers" in response.text
    assert "_auth_user_id" not in client.session
    assert SsoProfile.objects.get(user__username="lee").unmatched_groups == ["/staff/everyone"]


def test_sign_in_returns_to_the_page_asked_for(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, VISION_DEVELOPERS)
    client = Client()

    response = mock_provider.sign_in(client, "lee-sub", next_url="/audit/")

    assert response["Location"] == "/audit/"


def test_an_offsite_next_is_ignored(mock_provider: MockProvider, tenant_a: Tenant) -> None:
    _lee(mock_provider, VISION_DEVELOPERS)

    response = mock_provider.sign_in(Client(), "lee-sub", next_url="https://evil.example/")

    assert response["Location"] == "/home/"


def test_the_authorization_request_uses_pkce_state_and_nonce(
    mock_provider: MockProvider, db: None
) -> None:
    query = parse_qs(urlsplit(mock_provider.start(Client())).query)

    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) >= 43
    assert query["state"][0]
    assert query["nonce"][0]
    assert query["scope"] == ["openid email profile"]
    assert query["redirect_uri"] == ["http://testserver/accounts/oidc/callback/"]


def test_a_tampered_state_is_refused(mock_provider: MockProvider, tenant_a: Tenant) -> None:
    _lee(mock_provider, VISION_LEADS)
    client = Client()
    back = mock_provider.authorize(mock_provider.start(client), "lee-sub")

    response = client.get(back.replace("state=", "state=tampered"))

    assert response.status_code == 400
    assert "state mismatch" in response.text
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="lee").exists()


def test_an_answer_replayed_into_another_sign_in_fails_on_the_nonce(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, VISION_LEADS)
    victim, attacker = Client(), Client()
    victim_url = mock_provider.start(victim)
    attacker_back = mock_provider.authorize(mock_provider.start(attacker), "lee-sub")
    victim_state = parse_qs(urlsplit(victim_url).query)["state"][0]
    code = parse_qs(urlsplit(attacker_back).query)["code"][0]

    # The attacker's code, delivered with the victim's own state.
    response = victim.get(f"/accounts/oidc/callback/?code={code}&state={victim_state}")

    assert response.status_code == 400
    assert "nonce does not match" in response.text
    assert "_auth_user_id" not in victim.session


def test_an_expired_id_token_is_refused(tenant_a: Tenant) -> None:
    with (
        run_server_in_thread(port=0, access_token_max_age=timedelta(minutes=-10)) as server,
        sso_configured(f"http://localhost:{server.server_port}"),
    ):
        provider = MockProvider(f"http://localhost:{server.server_port}")
        _lee(provider, VISION_LEADS)
        client = Client()

        response = provider.sign_in(client, "lee-sub")

    assert response.status_code == 400
    assert "it has expired" in response.text
    assert "_auth_user_id" not in client.session


def _another_audience(issuer: KeycloakIssuer) -> None:
    issuer.id_token_overrides = {"aud": "another-client"}


def _an_unpublished_key(issuer: KeycloakIssuer) -> None:
    issuer.signing_key = rsa_key("realm-key")  # the published key's id, another key


def _hs256_with_the_client_secret(issuer: KeycloakIssuer) -> None:
    issuer.sign_with_client_secret = True  # the algorithm-confusion attack


@pytest.mark.parametrize(
    ("bend", "reason"),
    [
        (_another_audience, "it was issued for another client (audience)"),
        (_an_unpublished_key, "The ID token failed its checks"),
        (_hs256_with_the_client_secret, "The ID token failed its checks"),
    ],
)
def test_a_bent_id_token_is_refused(
    keycloak_issuer: KeycloakIssuer, tenant_a: Tenant, bend, reason: str
) -> None:
    keycloak_issuer.user = {"sub": "lee-sub", "preferred_username": "lee", "groups": [VISION_LEADS]}
    bend(keycloak_issuer)
    client = Client()

    response = sign_in_at_issuer(client)

    assert response.status_code == 400
    assert reason in response.text
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="lee").exists()


def test_a_keycloak_sign_in_checks_pkce_and_reads_client_roles(
    keycloak_issuer: KeycloakIssuer, db: None
) -> None:
    keycloak_issuer.user = {
        "sub": "f3c1",
        "preferred_username": "fin",
        **_roles("finance"),
    }
    client = Client()

    response = sign_in_at_issuer(client)

    assert response["Location"] == "/home/"
    assert User.objects.get(username="fin").global_role == GlobalRole.FINANCE


def test_sign_out_also_ends_the_providers_session(
    keycloak_issuer: KeycloakIssuer, db: None
) -> None:
    keycloak_issuer.user = {"sub": "f3c1", "preferred_username": "fin", **_roles("finance")}
    client = Client()
    sign_in_at_issuer(client)

    response = client.post("/accounts/logout/")

    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        f"{keycloak_issuer.issuer}/protocol/openid-connect/logout"
    )
    query = parse_qs(location.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/accounts/login/"]
    assert query["id_token_hint"][0].count(".") == 2
    assert "_auth_user_id" not in client.session


def test_a_provider_that_cannot_be_reached_gives_a_clear_page(db: None) -> None:
    with sso_configured("http://127.0.0.1:9/realms/nowhere"):
        response = Client().get("/accounts/oidc/login/")

    assert response.status_code == 502
    assert "discovery document could not be read" in response.text


def test_a_local_password_account_cannot_be_taken_over_by_a_provider_username(
    developer: User, mock_provider: MockProvider
) -> None:
    mock_provider.set_user("other-sub", preferred_username="dev", groups=[VISION_LEADS])
    client = Client()

    response = mock_provider.sign_in(client, "other-sub")

    assert response.status_code == 400
    assert "belongs to another account" in response.text
    assert Membership.objects.get(user=developer).role == MemberRole.DEVELOPER


def test_with_sso_on_passwords_work_only_for_break_glass_accounts(
    developer: User, admin_user: User, mock_provider: MockProvider
) -> None:
    page = Client().get("/accounts/login/")
    assert "Sign in with Keycloak" in page.text
    assert 'name="password"' not in page.text
    refusing = Client()
    refused = refusing.post("/accounts/login/", {"username": "dev", "password": PASSWORD})
    assert refused.status_code == 200
    assert "_auth_user_id" not in refusing.session

    with override_settings(PORTAL_BREAK_GLASS_USERS=["admin"]):
        page = Client().get("/accounts/login/")
        admin = Client().post("/accounts/login/", {"username": "admin", "password": PASSWORD})
        developer_refused = Client().post(
            "/accounts/login/", {"username": "dev", "password": PASSWORD}
        )

    assert "Break-glass administrator sign-in" in page.text
    assert admin.status_code == 302
    assert developer_refused.status_code == 200


def test_with_sso_off_the_oidc_routes_do_not_exist(client: Client, db: None) -> None:
    assert client.get("/accounts/oidc/login/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").text


def test_the_mapping_in_portal_mode_leaves_memberships_alone(
    mock_provider: MockProvider, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    _lee(mock_provider, VISION_LEADS)
    mock_provider.sign_in(Client(), "lee-sub")

    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        _lee(mock_provider, NLP_DEVELOPERS)
        response = mock_provider.sign_in(Client(), "lee-sub")

    assert response["Location"] == "/home/"
    assert list(
        Membership.objects.filter(user__username="lee").values_list("tenant__slug", "role")
    ) == [("vision", "lead")]


def test_groups_of_tenants_that_do_not_exist_are_shown_as_unmatched(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, VISION_DEVELOPERS, "/gpu-portal/tenants/ghost/leads")

    mock_provider.sign_in(Client(), "lee-sub")

    profile = SsoProfile.objects.get(user__username="lee")
    assert profile.unmatched_groups == ["/gpu-portal/tenants/ghost/leads"]
    tenant_create(actor=None, slug="ghost", name="Ghost")
    mock_provider.sign_in(Client(), "lee-sub")
    assert Membership.objects.get(user__username="lee", tenant__slug="ghost").role == "lead"


@pytest.mark.parametrize("persona", ["developer", "lead", "outsider", "finance_user"])
def test_only_admins_see_the_identity_page_and_api(
    request: pytest.FixtureRequest, client_for, persona: str
) -> None:
    client = client_for(request.getfixturevalue(persona))

    assert client.get("/accounts/identity/").status_code == 404
    assert client.get("/api/v1/identity").status_code == 404
    assert client.get("/api/v1/users/").status_code == 404


def test_the_identity_page_shows_the_mapping_and_each_users_last_sign_in(
    mock_provider: MockProvider,
    tenant_a: Tenant,
    client_for,
    admin_user: User,
    django_assert_max_num_queries,
) -> None:
    for number in range(12):
        mock_provider.set_user(
            f"sub-{number}",
            preferred_username=f"user{number:02}",
            groups=[VISION_DEVELOPERS, "/staff"],
        )
        mock_provider.sign_in(Client(), f"sub-{number}")
    client = client_for(admin_user)

    with django_assert_max_num_queries(8):
        page = client.get("/accounts/identity/")
    with django_assert_max_num_queries(8):
        api = client.get("/api/v1/users/?q=user0")

    assert page.status_code == 200
    assert "resource_access.{client_id}.roles" in page.text
    assert "user11" in page.text
    assert "/staff" in page.text
    users = api.json()["results"]
    assert [user["username"] for user in users] == [f"user{n:02}" for n in range(10)]
    assert users[0]["tenants"] == [{"slug": "vision", "name": tenant_a.name, "role": "developer"}]
    assert users[0]["sso"]["unmatched_groups"] == ["/staff"]
    mapping = client.get("/api/v1/identity").json()
    assert mapping["tenant_group"] == "/gpu-portal/tenants/{tenant}/{role}"
    assert mapping["membership_source"] == "identity-provider"


def test_a_lead_group_wins_over_a_developer_group_and_role_changes_are_audited(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    _lee(mock_provider, VISION_DEVELOPERS)
    mock_provider.sign_in(Client(), "lee-sub")

    _lee(mock_provider, VISION_DEVELOPERS, VISION_LEADS)
    mock_provider.sign_in(Client(), "lee-sub")

    assert Membership.objects.get(user__username="lee").role == MemberRole.LEAD
    change = AuditEvent.objects.get(action="membership.change")
    assert change.changes == {"role": ["developer", "lead"]}


def test_memberships_in_archived_tenants_are_kept_but_give_no_access(
    mock_provider: MockProvider, tenant_a: Tenant, admin_user: User
) -> None:
    _lee(mock_provider, VISION_DEVELOPERS)
    mock_provider.sign_in(Client(), "lee-sub")
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")

    response = mock_provider.sign_in(Client(), "lee-sub")

    assert response.status_code == 403
    assert Membership.objects.filter(user__username="lee", tenant=tenant_a).exists()


def test_a_disabled_user_cannot_sign_in(mock_provider: MockProvider, tenant_a: Tenant) -> None:
    _lee(mock_provider, VISION_DEVELOPERS)
    mock_provider.sign_in(Client(), "lee-sub")
    User.objects.filter(username="lee").update(is_active=False)
    client = Client()

    response = mock_provider.sign_in(client, "lee-sub")

    assert response.status_code == 400
    assert "disabled" in response.text
    assert "_auth_user_id" not in client.session


def test_an_account_an_admin_made_without_a_password_is_taken_over_at_first_sign_in(
    mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    made = user_create(actor=None, username="lee", email="old@example.org")
    _lee(mock_provider, VISION_DEVELOPERS)

    response = mock_provider.sign_in(Client(), "lee-sub")

    assert response["Location"] == "/home/"
    made.refresh_from_db()
    assert made.sso.subject == "lee-sub"
    assert made.email == "lee@example.org"


def test_with_memberships_from_the_provider_the_portal_refuses_to_edit_them(
    lead: User, developer: User, client_for, mock_provider: MockProvider
) -> None:
    client = client_for(lead)

    page = page_loaded(client, "/tenants/vision/")
    added = client.post("/api/v1/tenants/vision/members/", {"username": "dev", "role": "lead"})
    removed = client.delete("/api/v1/tenants/vision/members/dev/")

    assert 'data-testid="members-from-provider"' in page
    assert "/gpu-portal/tenants/vision/leads" in page
    assert "Add or change member" not in page
    assert "/remove/" not in page
    assert added.status_code == 409
    assert "come from the identity provider" in added.json()["error"]["message"]
    assert removed.status_code == 409
    assert Membership.objects.get(user=developer).role == MemberRole.DEVELOPER
