"""A developer extends beyond the tenant's policy, says why and sees it waiting; a lead approves
it with a comment from Approvals; the developer sees the new end. In English, and in Simplified
Chinese as a browser set to zh-CN asks for it (the Chinese run needs the compiled catalog)."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from portal.allocations.models import GpuRequestExtension
from portal.allocations.services import gpu_request_submit
from tests.conftest import PASSWORD
from tests.e2e.console import console_problems

pytestmark = pytest.mark.browser

# What each run reads on the page: the texts this feature wrote, in the run's language.
TEXTS = {
    "en": {
        "needs_reason": "Reason for the lead",
        "ask": "Ask a lead",
        "waiting": "is waiting for a lead",
        "approved": "is approved",
    },
    "zh-hans": {
        "needs_reason": "给负责人的理由",
        "ask": "请负责人审批",
        "waiting": "正在等待负责人审批",
        "approved": "已批准",
    },
}
CONTEXTS: dict[str, dict[str, Any]] = {
    "en": {"locale": "en-GB"},
    "zh-hans": {"locale": "zh-CN", "extra_http_headers": {"Accept-Language": "zh-Hans"}},
}


def signed_in(browser: Browser, base_url: str, username: str, language: str) -> Page:
    """A page of a new context in the run's language, signed in (by field names, which no
    translation changes)."""
    context: BrowserContext = browser.new_context(**CONTEXTS[language])
    page = context.new_page()
    page.goto(f"{base_url}/accounts/login/")
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("form:has(input[name=username]) button[type=submit]").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_developer_extends_beyond_the_policy_and_the_lead_approves_from_approvals(
    live_server, browser: Browser, developer, lead, a100_tenant, catalog, language: str
) -> None:
    text = TEXTS[language]
    allocation = gpu_request_submit(
        actor=developer,
        tenant=a100_tenant,
        offering=catalog["a100-80gb-whole"],
        count=1,
        duration_hours=4,
    )
    end = allocation.ends_at
    assert end is not None

    # The developer asks for 12 more hours: vision grants 8 at once, so a lead must decide.
    developer_page = signed_in(browser, live_server.url, "dev", language)
    problems = console_problems(developer_page)
    developer_page.goto(f"{live_server.url}/requests/")
    row = developer_page.get_by_test_id(f"time-left-{allocation.pk}").locator("xpath=..")
    row.locator("input[name=hours]").fill("12")
    row.locator("form[action$='/extend/'] button[type=submit]").click()
    reason = developer_page.locator("textarea[name=reason]")
    expect(developer_page.locator(f"label[for={reason.get_attribute('id')}]")).to_have_text(
        text["needs_reason"]
    )
    expect(developer_page.locator("input[name=hours]")).to_have_value("12")
    reason.fill("The training run needs the night.")
    developer_page.get_by_role("button", name=text["ask"]).click()
    expect(developer_page.get_by_role("status")).to_contain_text(text["waiting"])
    expect(developer_page.get_by_test_id(f"extension-waiting-{allocation.pk}")).to_be_visible()
    extension = GpuRequestExtension.objects.get(request=allocation)

    # The lead finds it in Approvals, beside the requests, with the quota left, and approves.
    lead_page = signed_in(browser, live_server.url, "lead", language)
    lead_page.goto(f"{live_server.url}/approvals/")
    pending = lead_page.get_by_test_id(f"extension-{extension.pk}")
    expect(pending).to_contain_text("The training run needs the night.")
    expect(lead_page.get_by_test_id(f"extension-quota-left-{extension.pk}")).to_contain_text("9")
    pending.locator("input[name=comment]").fill("Go ahead.")
    lead_page.get_by_test_id(f"approve-extension-{extension.pk}").click()
    expect(lead_page.get_by_role("status")).to_contain_text(text["approved"])
    expect(lead_page.get_by_test_id(f"extension-{extension.pk}")).to_have_count(0)

    # The developer's table polls while the extension waits: the new end shows up by itself.
    waiting = developer_page.get_by_test_id(f"extension-waiting-{allocation.pk}")
    expect(waiting).to_have_count(0, timeout=10_000)
    ends_at = developer_page.get_by_test_id(f"time-left-{allocation.pk}").get_attribute(
        "data-ends-at"
    )
    assert ends_at is not None
    assert datetime.fromisoformat(ends_at) == end + timedelta(hours=12)
    # The refused form answers 422 on purpose (the form again, with the reason asked for).
    assert [problem for problem in problems if "status of 422" not in problem] == []
