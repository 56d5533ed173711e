"""Chargeback in Chromium: finance picks last month, closes it from the page, downloads a
statement's CSV whose amounts add up to the total the page shows; the tenant's lead then finds
the final statement from the tenant page. All under the site's CSP."""

import csv
import re
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from portal.billing.models import Period, PeriodState
from portal.core.models import AuditEvent
from tests.billing.test_pages import PERIOD, ledger, month  # noqa: F401  (fixtures)
from tests.e2e.console import console_problems
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_finance_closes_last_month_downloads_the_csv_and_a_lead_sees_the_final_statement(
    live_server,
    page: Page,
    month,  # noqa: F811  (last month's usage of vision and nlp, priced, metering complete)
    finance_user,
    lead,
) -> None:
    problems = console_problems(page)

    # Finance lands on Home, follows the spend panel to Chargeback and picks last month with
    # the period picker (htmx swaps it).
    sign_in(page, live_server.url, "finance")
    spend = page.get_by_test_id("home-panel-spend")
    spend.get_by_role("link", name="Open the full page").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Chargeback")
    page.get_by_label("Month").fill(PERIOD)
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(rf"/chargeback/\?period={PERIOD}&"))
    expect(page.get_by_test_id("month-state")).to_have_text("open")
    vision = page.get_by_test_id("statement-vision")
    expect(vision).to_contain_text("provisional")

    # Close the month from the page.
    page.get_by_role("button", name="Close this month").click()
    expect(page.get_by_role("status")).to_contain_text(f"{PERIOD} is closed")
    expect(page.get_by_test_id("month-state")).to_have_text("closed")
    expect(vision).to_contain_text("final")
    expect(page.get_by_role("button", name="Close this month")).to_have_count(0)
    page_total = Decimal(page.get_by_test_id("total-vision").inner_text())
    assert page_total == Decimal("22.86")
    assert Period.objects.get(month__year=int(PERIOD[:4]), month__month=int(PERIOD[5:])).state == (
        PeriodState.CLOSED
    )
    assert AuditEvent.objects.filter(action="period.close").count() == 1

    # Its statement: download the CSV; its amounts add up to the page's total.
    vision.get_by_role("link").click()
    expect(page.get_by_test_id("statement-state")).to_have_text("final")
    expect(page.get_by_test_id("history")).to_contain_text("closed")
    with page.expect_download() as download:
        page.get_by_test_id("download-csv").click()
    assert download.value.suggested_filename == f"statement-{PERIOD}-vision.csv"
    with Path(download.value.path()).open(newline="") as downloaded:
        rows = list(csv.DictReader(downloaded))
    assert sum(Decimal(row["amount"]) for row in rows) == page_total
    assert {row["status"] for row in rows} == {"final"}
    page.get_by_role("button", name="Sign out").click()

    # The lead follows the tenant page's link, then the last closed month, to the final statement.
    sign_in(page, live_server.url, "lead")
    page.get_by_role("link", name="Computer Vision Lab").first.click()
    page.get_by_test_id("tenant-chargeback-link").get_by_role("link").click()
    page.get_by_test_id("last-closed").click()
    expect(page.get_by_test_id("statement-nlp")).to_have_count(0)
    expect(page.get_by_test_id("total-vision")).to_have_text(str(page_total))
    page.get_by_test_id("statement-vision").get_by_role("link").click()
    expect(page.get_by_test_id("statement-state")).to_have_text("final")
    expect(page.get_by_test_id("statement-total")).to_have_text(f"{page_total} EUR")
    expect(page.get_by_role("button", name="Close this month")).to_have_count(0)

    assert not problems, problems
