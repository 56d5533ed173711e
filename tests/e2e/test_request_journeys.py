import pytest
from playwright.sync_api import Page, expect

from tests.e2e.navigation import follow_nav
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_developer_requests_a_3g_40gb_slice_within_policy_and_sees_it_approved(
    live_server, page: Page, developer, a100_tenant
) -> None:
    sign_in(page, live_server.url, "dev")
    page.get_by_role("link", name="My requests").click()
    page.get_by_role("link", name="Request GPUs").first.click()

    page.get_by_label("Tenant").select_option("vision")
    page.get_by_label("GPU and size").select_option("a100-80gb-mig-3g-40gb")
    expect(page.get_by_test_id("decision-path")).to_contain_text("Approved at once")
    expect(page.get_by_test_id("quota-after")).to_contain_text("9.57 of 10")
    page.get_by_role("button", name="Request").click()

    expect(page.get_by_role("status")).to_contain_text("is approved")
    expect(page.locator("[data-testid^=request-state-]")).to_have_text("approved")


def test_lead_approves_from_the_queue_and_the_developer_sees_it_without_reloading(
    live_server, browser, developer, lead, a100_tenant
) -> None:
    developer_page = browser.new_context().new_page()
    sign_in(developer_page, live_server.url, "dev")
    developer_page.goto(f"{live_server.url}/requests/new/")
    developer_page.get_by_label("Tenant").select_option("vision")
    developer_page.get_by_label("GPU and size").select_option("a100-80gb-whole")
    developer_page.get_by_label("Count").fill("2")
    expect(developer_page.get_by_test_id("decision-path")).to_contain_text("Needs a lead")
    developer_page.get_by_role("button", name="Request").click()
    state = developer_page.locator("[data-testid^=request-state-]")
    expect(state).to_have_text("pending")

    lead_page = browser.new_context().new_page()
    sign_in(lead_page, live_server.url, "lead")
    follow_nav(lead_page, "Approvals")
    lead_page.get_by_label("Comment on request").fill("go ahead")
    lead_page.get_by_role("button", name="Approve", exact=True).click()
    expect(lead_page.get_by_role("status")).to_contain_text("is approved")

    # No reload: the developer's table polls while something is pending.
    expect(state).to_have_text("approved", timeout=10_000)
