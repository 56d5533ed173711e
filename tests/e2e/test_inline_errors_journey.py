"""Refused inline forms on the tenant page answer in place: the error beside the field it names,
what was typed kept, focus on the first error; in English and in Chinese (asserted on ids)."""

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import PASSWORD
from tests.e2e.console import console_problems

pytestmark = pytest.mark.browser

LANGUAGES = [pytest.param(None, id="en"), pytest.param("zh-Hans", id="zh-hans")]


def signed_in(browser: Browser, base_url: str, username: str, language: str | None) -> Page:
    headers = {"Accept-Language": language} if language else {}
    page = browser.new_context(extra_http_headers=headers).new_page()
    page.goto(f"{base_url}/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form[action$='/accounts/login/'] button[type=submit]").click()
    page.wait_for_function("typeof window.htmx === 'object'", timeout=10_000)
    return page


def open_tenant(page: Page, base_url: str, language: str | None) -> None:
    page.goto(f"{base_url}/tenants/vision/")
    if language:
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.wait_for_function("typeof window.htmx === 'object'", timeout=10_000)


@pytest.mark.parametrize("language", LANGUAGES)
def test_lead_adds_an_unknown_member_and_sees_the_error_beside_the_field(
    live_server, browser: Browser, lead, a100_tenant, language
) -> None:
    page = signed_in(browser, live_server.url, "lead", language)
    problems = console_problems(page)
    open_tenant(page, live_server.url, language)

    members = page.locator("#members")
    members.locator("#member_username").fill("nobody-here")
    members.locator("button[type=submit].primary").click()

    username = page.locator("#member_username")
    expect(page.locator("#member_username_error")).to_be_visible()
    if not language:
        expect(page.locator("#member_username_error")).to_contain_text(
            "There is no active user with this username."
        )
    expect(username).to_have_attribute("aria-invalid", "true")
    expect(username).to_have_attribute("aria-describedby", "member_username_error")
    expect(username).to_have_value("nobody-here")
    expect(username).to_be_focused()
    # The error stays inside the members card: nothing else on the page moved.
    expect(page.locator("#members")).to_have_count(1)
    expect(page.locator("#quota-requests")).to_have_count(1)
    assert [problem for problem in problems if "400" not in problem] == []


@pytest.mark.parametrize("language", LANGUAGES)
def test_lead_asks_for_a_bad_amount_of_quota_and_sees_why(
    live_server, browser: Browser, lead, a100_tenant, language
) -> None:
    page = signed_in(browser, live_server.url, "lead", language)
    open_tenant(page, live_server.url, language)
    section = page.locator("#quota-requests")
    section.locator("#quota_request_gpu_model").select_option(index=1)
    section.locator("#quota_request_reason").fill("training run")

    for amount in ["-1", "abc", "1/0"]:
        page.locator("#quota_request_amount").fill(amount)
        page.locator("#quota-requests button[type=submit].primary").click()
        amount_input = page.locator("#quota_request_amount")
        expect(amount_input).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#quota_request_amount_error")).to_be_visible()
        expect(amount_input).to_have_value(amount)
        expect(amount_input).to_be_focused()
        expect(page.locator("#quota_request_reason")).to_have_value("training run")


@pytest.mark.parametrize("language", LANGUAGES)
def test_admin_sets_a_bad_quota_and_sees_the_error_beside_the_field(
    live_server, browser: Browser, admin_user, a100_tenant, language
) -> None:
    page = signed_in(browser, live_server.url, "admin", language)
    open_tenant(page, live_server.url, language)
    page.locator("#quota_gpu_model").select_option(index=1)

    for amount in ["-1", "abc", "1/0", ""]:
        page.locator("#quota_gpu_eq").fill(amount)
        if amount == "":
            # The browser's own check stops an empty required field; the server's is the same.
            page.locator("#quota_gpu_eq").evaluate("input => input.removeAttribute('required')")
        page.locator("#quotas button[type=submit].primary").click()
        quota_input = page.locator("#quota_gpu_eq")
        expect(quota_input).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#quota_gpu_eq_error")).to_be_visible()
        expect(quota_input).to_have_value(amount)
        expect(quota_input).to_be_focused()
        # The help text the field points at exists.
        expect(page.locator("#quota_gpu_eq_helptext")).to_have_count(1)

    expect(page.get_by_test_id("quota-a100-80gb")).to_contain_text("10")
