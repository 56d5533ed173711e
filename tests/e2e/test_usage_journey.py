"""A lead's usage page in Chromium: the chart is drawn under the site's CSP, its table and the
CSV have the numbers the chart was given, and an idle allocation is released from the page."""

import csv
import json
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Page, expect

from portal.allocations.models import GpuRequest, RequestState
from tests.e2e.console import console_problems
from tests.e2e.navigation import follow_nav
from tests.e2e.test_tenant_admin_journey import sign_in
from tests.metering.usage_data import scenario
from tests.workloads.conftest import gpu_tenant  # noqa: F401  (a fixture)

pytestmark = pytest.mark.browser

TABLE_ROWS = """name => Array.from(document.querySelectorAll(`table[data-table="${name}"] tr`))
  .map(tr => Array.from(tr.cells).map(cell => cell.textContent.trim()))"""


def test_a_lead_reads_the_tenants_usage_chart_table_and_csv_and_releases_an_idle_allocation(
    live_server,
    page: Page,
    developer,
    lead,
    gpu_tenant,  # noqa: F811
    catalog,
) -> None:
    usage = scenario(
        tenant=gpu_tenant, developer=developer, lead=lead, offering=catalog["a100-80gb-whole"]
    )
    problems = console_problems(page)
    sign_in(page, live_server.url, "lead")

    # From My usage, the lead follows the link to the tenant's usage.
    follow_nav(page, "My usage")
    page.get_by_test_id("tenants-led").get_by_role("link", name="Computer Vision Lab").click()
    page.goto(f"{live_server.url}/usage/tenants/vision/?{urlencode(usage.params)}")
    expect(page.get_by_test_id("watermark-demo")).to_contain_text("Usage complete until")

    # The chart is drawn: uPlot's canvas inside the chart's container, one per GPU model.
    chart = page.locator('[data-chart="models"]')
    expect(chart).to_have_attribute("data-drawn", "true")
    expect(chart.locator("canvas").first).to_be_attached()
    data = json.loads(page.locator("#usage-data").text_content() or "{}")
    (models,) = data["tables"]
    assert chart.locator("canvas").count() == len({row[1] for row in models["rows"]})

    # Its table shows the numbers the chart was given.
    shown = page.evaluate(TABLE_ROWS, "models")
    assert shown == [models["labels"], *models["rows"]]
    assert len(shown) > 1

    # The CSV download has the same numbers.
    with page.expect_download() as download:
        page.get_by_test_id("csv-models").click()
    with Path(download.value.path()).open(newline="") as downloaded:
        assert list(csv.reader(downloaded)) == shown

    # Release the idle allocation from the page: it asks first (a dialog, htmx with the CSRF
    # header), then the confirmation posts and the page comes back saying so.
    idle = page.get_by_test_id(f"idle-{usage.idle.pk}")
    expect(idle).to_be_visible()  # the section loads after the page
    expect(page.get_by_test_id(f"idle-{usage.busy.pk}")).to_have_count(0)
    idle.get_by_role("button", name="Release").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading")).to_have_text(f"Release allocation {usage.idle.pk}?")
    assert GpuRequest.objects.get(pk=usage.idle.pk).state == RequestState.APPROVED
    dialog.get_by_role("button", name="Release allocation").click()
    expect(page.locator("ul.messages")).to_contain_text(f"Allocation {usage.idle.pk} is released.")
    expect(idle).to_have_count(0)
    assert GpuRequest.objects.get(pk=usage.idle.pk).state == RequestState.RELEASED

    assert not problems, problems
