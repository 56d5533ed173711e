"""The spend chart in Chromium: finance's chargeback page draws stacked bars of spend per tenant
per month under the site's CSP, the legend names the tenants, and picking another month (an
htmx swap) draws the chart again for the months up to it."""

import re

import pytest
from playwright.sync_api import Page, expect

from portal.billing.pricing import current_month
from tests.billing.test_pages import PERIOD, ledger, month  # noqa: F401  (fixtures)
from tests.e2e.console import console_problems
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_finance_sees_spend_per_tenant_per_month_drawn_and_redrawn_for_another_month(
    live_server,
    page: Page,
    month,  # noqa: F811  (last month's usage of vision and nlp, priced)
    finance_user,
) -> None:
    problems = console_problems(page)
    sign_in(page, live_server.url, "finance")
    page.goto(f"{live_server.url}/chargeback/?period={PERIOD}")

    chart = page.get_by_test_id("chart-spend-EUR")
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator("canvas")).to_have_count(1)
    legend = chart.locator(".u-legend")
    expect(legend).to_contain_text("Computer Vision Lab")
    expect(legend).to_contain_text("Language Models Team")
    # The table of the chart's numbers, for those who do not see the chart.
    page.get_by_text("Table of the chart's numbers (EUR)").click()
    expect(page.get_by_test_id(f"spend-EUR-{PERIOD}")).to_contain_text("22.86")

    # This month through the picker: htmx swaps the listing and the chart is drawn anew, for
    # the twelve months up to it (last month's spend among them).
    page.get_by_label("Month").fill(f"{current_month():%Y-%m}")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(rf"/chargeback/\?period={current_month():%Y-%m}"))
    chart = page.get_by_test_id("chart-spend-EUR")
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart.locator(".u-legend")).to_contain_text("Computer Vision Lab")

    assert not problems, problems
