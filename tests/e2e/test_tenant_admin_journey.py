import re

import pytest
from playwright.sync_api import Page, expect

from portal.accounts.services import user_create
from tests.conftest import PASSWORD
from tests.tenants.factories import a100

pytestmark = pytest.mark.browser


def sign_in(page: Page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def test_admin_creates_a_tenant_adds_a_lead_and_sets_a_quota_that_the_lead_sees(
    live_server, page: Page, admin_user
) -> None:
    a100(admin_user)
    user_create(actor=None, username="rhea", first_name="Rhea", last_name="Lead", password=PASSWORD)

    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/manage/tenants/")
    page.get_by_role("link", name="New tenant").click()
    page.get_by_label("Slug").fill("genomics")
    page.get_by_label("Name").fill("Genomics Lab")
    page.get_by_label("Cost centre").fill("CC-5100")
    page.get_by_role("button", name="Create tenant").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Genomics Lab")
    expect(page.get_by_role("status")).to_contain_text("Tenant genomics was created.")

    members = page.locator("#members")
    members.get_by_label("Username").fill("rhea")
    members.get_by_label("Role").select_option("lead")
    members.get_by_role("button", name="Add or change member").click()
    expect(page.get_by_test_id("member-rhea")).to_contain_text("lead")

    quotas = page.locator("#quotas")
    quotas.get_by_label("GPU model").select_option(label="NVIDIA A100-SXM4-80GB")
    quotas.get_by_label("Quota (GPU-eq)").fill("4")
    quotas.get_by_role("button", name="Set quota").click()
    expect(page.get_by_test_id("quota-a100-80gb")).to_contain_text("4")
    page.get_by_role("button", name="Sign out").click()

    sign_in(page, live_server.url, "rhea")
    # The lead's home shows the new tenant's quota, nothing of it held yet.
    expect(page.get_by_role("heading", level=1)).to_have_text("Home")
    quota = page.get_by_test_id("home-quota-genomics-a100-80gb")
    expect(quota).to_contain_text("NVIDIA A100-SXM4-80GB")
    expect(quota).to_contain_text("0 / 4")
    page.get_by_test_id("home-panel-quota-burn").get_by_role("link", name="Genomics Lab").click()
    expect(page).to_have_url(re.compile(r"/tenants/genomics/$"))
    quota_row = page.get_by_test_id("quota-a100-80gb")
    expect(quota_row.locator("td.remaining")).to_have_text("4")


def test_admin_searches_tenants_without_reloading(
    live_server, page: Page, admin_user, tenant_a, tenant_b
) -> None:
    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/manage/tenants/")

    page.get_by_label("Search").fill("language")

    table = page.locator("#tenant-table")
    expect(table).to_contain_text(tenant_b.name)
    expect(table).not_to_contain_text(tenant_a.name)
    expect(page).to_have_url(re.compile(r"q=language"))
