"""Budgets in Chromium: finance gives a tenant a monthly budget from its page (htmx swaps the
section and the burn-down is drawn), then the tenant's lead finds the burn-down on the tenant
page: the chart, the figures and the table beside it. All under the site's CSP."""

import pytest
from playwright.sync_api import Page, expect

from portal.billing.models import Budget
from tests.billing.test_budgets import NOW_BEGIN, WHOLE, Spend, spend  # noqa: F401  (fixtures)
from tests.e2e.console import console_problems
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_finance_sets_a_budget_and_a_lead_sees_the_burn_down(
    live_server,
    page: Page,
    spend: Spend,  # noqa: F811
    finance_user,
    lead,
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 5)  # 10.00 EUR this month
    spend.collect()
    problems = console_problems(page)

    # Finance sets 12.00 EUR a month, with the lead-approval policy, on the tenant page.
    sign_in(page, live_server.url, "finance")
    page.goto(f"{live_server.url}/tenants/vision/")
    expect(page.get_by_test_id("budget-none")).to_be_visible()
    form = page.get_by_test_id("budget-form")
    form.get_by_label("Budget in").select_option("money")
    form.get_by_label("Amount a month").fill("12")
    form.get_by_label("Currency").fill("EUR")
    form.get_by_label("Above the budget, every new request needs a lead's approval").check()
    form.get_by_role("button", name="Set budget").click()
    expect(page.get_by_test_id("budget-amount")).to_have_text("12.00 EUR a month")
    expect(page.get_by_test_id("budget-percent")).to_have_text("83.3%")
    expect(page.get_by_test_id("budget-warning")).to_be_visible()
    expect(page.get_by_test_id("budget-chart").locator("canvas")).to_have_count(1)
    assert Budget.objects.get().approval_above
    page.get_by_role("button", name="Sign out").click()

    # The lead finds the burn-down on the tenant page: chart, figures and the daily table.
    sign_in(page, live_server.url, "lead")
    page.get_by_role("link", name="Computer Vision Lab").first.click()
    budget = page.get_by_test_id("budget")
    expect(budget.get_by_test_id("budget-spent")).to_have_text("10.00")
    expect(budget.get_by_test_id("budget-percent")).to_have_text("83.3%")
    expect(budget.get_by_test_id("budget-policy")).to_contain_text("lead's approval")
    chart = budget.get_by_test_id("budget-chart")
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator("canvas")).to_be_visible()
    expect(chart).to_contain_text("projected")  # the legend: spent, projected, budget
    budget.get_by_text("Spent by day").click()
    days = budget.get_by_test_id("budget-days").locator("tbody tr")
    expect(days.last).to_contain_text("10.00")
    expect(budget.get_by_test_id("budget-form")).to_have_count(0)

    assert not problems, problems
