"""Signing in through the identity provider in a real browser: the provider's own page, then the
start page of the role the provider's groups and roles give."""

import pytest
from playwright.sync_api import Page, expect

from tenants.models import Tenant
from tests.oidc.fixtures import MockProvider

pytestmark = pytest.mark.browser


@pytest.mark.parametrize(
    ("claims", "panel"),
    [
        ({"groups": ["/gpu-portal/tenants/vision/leads"]}, "approvals"),
        ({"groups": ["/gpu-portal/tenants/vision/developers"]}, "my-notebooks"),
        ({"resource_access": {"gpu-portal": {"roles": ["finance"]}}}, "spend"),
        ({"resource_access": {"gpu-portal": {"roles": ["admin"]}}}, "attention"),
    ],
)
def test_sign_in_at_the_provider_lands_on_the_roles_home(
    live_server, page: Page, mock_provider: MockProvider, tenant_a: Tenant, claims, panel
) -> None:
    mock_provider.set_user(
        "lee-sub", preferred_username="lee", given_name="Lee", family_name="Park", **claims
    )

    page.goto(live_server.url)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_label("Password")).to_have_count(0)
    page.get_by_role("link", name="Sign in with Keycloak").click()

    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.get_by_label("Subject").fill("lee-sub")
    page.get_by_role("button", name="Authorize").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Home")
    expect(page.get_by_test_id(f"home-panel-{panel}")).to_be_visible()
    expect(page.get_by_test_id("current-user")).to_have_text("Lee Park")


def test_someone_the_provider_gives_no_role_sees_why(
    live_server, page: Page, mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    mock_provider.set_user("sam-sub", preferred_username="sam", groups=["/staff"])

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Keycloak").click()
    page.get_by_label("Subject").fill("sam-sub")
    page.get_by_role("button", name="Authorize").click()

    expect(page.get_by_role("heading", name="No access yet")).to_be_visible()
    expect(page.get_by_text("/gpu-portal/tenants/vision/developers")).to_be_visible()
    page.get_by_role("link", name="Back to sign-in").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_an_admin_reads_the_mapping_and_what_it_gave_each_user(
    live_server, page: Page, mock_provider: MockProvider, tenant_a: Tenant
) -> None:
    mock_provider.set_user(
        "ada-sub",
        preferred_username="ada",
        groups=["/gpu-portal/tenants/vision/leads", "/staff"],
        resource_access={"gpu-portal": {"roles": ["admin"]}},
    )

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Keycloak").click()
    page.get_by_label("Subject").fill("ada-sub")
    page.get_by_role("button", name="Authorize").click()
    main_navigation = page.get_by_role("navigation", name="Main")
    main_navigation.get_by_text("Admin", exact=True).click()  # the admin's group menu
    main_navigation.get_by_role("link", name="Identity").click()

    expect(page.get_by_test_id("mapping")).to_contain_text("/gpu-portal/tenants/vision/leads")
    row = page.get_by_test_id("user-ada")
    expect(row).to_contain_text("admin")
    expect(row).to_contain_text("vision lead")
    expect(row).to_contain_text("/staff")
