"""An admin suspends a tenant only after confirming, in English and in Simplified Chinese: the
first click shows the confirmation (a modal dialog, keyboard first: focus on Cancel, Escape
closes it) and the tenant stays active; cancelling leaves it active; confirming suspends it."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from portal.accounts.models import User
from tenants.models import Tenant
from tests.e2e.console import console_problems

pytestmark = pytest.mark.browser

CATALOG = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"

# What the person reads, per language: the words of the confirmation and the tenant's state.
WORDS = {
    "en": {
        "suspend": "Suspend",
        "title": "Suspend tenant Computer Vision Lab?",
        "confirm": "Suspend tenant",
        "cancel": "Cancel",
        "active": "active",
        "suspended": "suspended",
    },
    "zh-Hans": {
        "suspend": "停用",
        "title": "停用租户 Computer Vision Lab\N{FULLWIDTH QUESTION MARK}",
        "confirm": "停用租户",
        "cancel": "取消",
        "active": "正常",
        "suspended": "已停用",
    },
}


@pytest.fixture(scope="session")
def compiled_catalogs() -> None:
    """The Chinese catalog compiled, as `make` builds it (the .mo is not committed)."""
    source, compiled = CATALOG / "django.po", CATALOG / "django.mo"
    assert source.exists(), f"{source} is missing: the Chinese translations are not there"
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        call_command("compilemessages", locale=["zh_Hans"], verbosity=0)


@pytest.fixture
def admin_page(
    browser: Browser, live_server, admin_user: User, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A page signed in as the admin (by session cookie: the sign-in form is not under test),
    asking for the language of the test's parameter."""
    language = request.node.callspec.params["language"]
    client = Client()
    client.force_login(admin_user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    context = browser.new_context(locale=language, extra_http_headers={"Accept-Language": language})
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}]
    )
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("language", ["en", "zh-Hans"])
def test_admin_suspends_a_tenant_only_after_confirming(
    compiled_catalogs, live_server, admin_page: Page, tenant_a: Tenant, language: str
) -> None:
    words = WORDS[language]
    page = admin_page
    problems = console_problems(page)
    page.goto(f"{live_server.url}/tenants/{tenant_a.slug}/")
    state = page.get_by_test_id("tenant-state")
    suspend = page.get_by_test_id("tenant-state-form").get_by_role("button", name=words["suspend"])
    dialog = page.get_by_role("dialog")
    expect(state).to_have_text(words["active"])

    # With the keyboard: the first press asks, focus lands on Cancel, Enter cancels.
    suspend.focus()
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text(words["title"])
    expect(dialog.get_by_test_id("confirm-cancel")).to_be_focused()
    expect(dialog.get_by_test_id("confirm-cancel")).to_have_text(words["cancel"])
    expect(state).to_have_text(words["active"])
    page.keyboard.press("Enter")
    expect(dialog).to_have_count(0)
    expect(suspend).to_be_focused()  # back where the person was
    tenant_a.refresh_from_db()
    assert tenant_a.state == "active"

    # Escape closes it too, and nothing changes.
    suspend.click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(state).to_have_text(words["active"])

    # Confirming suspends it.
    suspend.click()
    dialog.get_by_role("button", name=words["confirm"], exact=True).click()
    expect(state).to_have_text(words["suspended"])
    expect(suspend).to_have_count(0)
    tenant_a.refresh_from_db()
    assert tenant_a.state == "suspended"
    assert problems == []


def test_without_javascript_the_confirmation_is_a_page_of_its_own(
    browser: Browser, live_server, admin_user: User, tenant_a: Tenant
) -> None:
    client = Client()
    client.force_login(admin_user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    context = browser.new_context(java_script_enabled=False)
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}]
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/tenants/{tenant_a.slug}/")

    page.get_by_role("button", name="Suspend").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Suspend tenant Computer Vision Lab?")
    tenant_a.refresh_from_db()
    assert tenant_a.state == "active"
    page.get_by_test_id("confirm-cancel").click()
    expect(page.get_by_test_id("tenant-state")).to_have_text("active")

    page.get_by_role("button", name="Suspend").click()
    page.get_by_label("Why (for the audit log)").fill("unpaid invoices")
    page.get_by_role("button", name="Suspend tenant", exact=True).click()
    expect(page.get_by_test_id("tenant-state")).to_have_text("suspended")
    context.close()
