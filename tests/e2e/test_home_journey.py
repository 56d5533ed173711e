"""Each persona signs in in Chromium and lands on their home, showing their panels: in English,
then in Simplified Chinese (the browser asking for zh-Hans)."""

import re

import pytest
from django.utils import translation
from playwright.sync_api import Browser, Page, expect

from tests.core.test_home import World, world  # noqa: F401  (the homes' data, a fixture)
from tests.e2e.console import console_problems
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


PANELS = {
    "dev": ["my-notebooks", "my-allocations", "my-usage", "my-cost"],
    "lead": [
        "approvals", "quota-burn", "budgets", "idle", "my-notebooks", "my-allocations",
        "my-usage", "my-cost",
    ],
    "finance": ["spend"],
    "admin": ["attention", "runs", "capacity", "directory"],
}  # fmt: skip


def _rows(data: World) -> dict[str, list[str]]:
    """A row each persona's home shows from the data."""
    return {
        "dev": [f"home-notebook-{data.notebook.pk}", f"home-allocation-{data.pending.pk}"],
        "lead": [f"home-pending-request-{data.pending.pk}", "home-quota-vision-a100-80gb"],
        "finance": ["home-spend-vision", "home-spend-nlp"],
        "admin": [f"home-failed-run-{data.failed_run.pk}", "home-suspended-old-lab"],
    }


def _chinese(text: str) -> str:
    with translation.override("zh-hans"):
        return translation.gettext(text)


@pytest.mark.parametrize("username", ["dev", "lead", "finance", "admin"])
def test_each_persona_lands_on_a_home_with_its_panels_in_english_and_chinese(
    live_server,
    page: Page,
    username: str,
    world: World,  # noqa: F811
) -> None:
    problems = console_problems(page)

    sign_in(page, live_server.url, username)

    expect(page).to_have_url(re.compile(r"/home/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Home")
    panels = page.locator("[data-testid^='home-panel-']")
    expect(panels).to_have_count(len(PANELS[username]))
    for name, panel in zip(PANELS[username], panels.all(), strict=True):
        expect(panel).to_have_attribute("data-testid", f"home-panel-{name}")
    for row in _rows(world)[username]:
        expect(page.get_by_test_id(row)).to_be_visible()
    # Home is the first entry of the navigation (inside the first menu when the links are grouped
    # in menus, as for leads and admins), marked as the page shown.
    first = page.get_by_test_id("nav-wide").locator("a").first
    expect(first).to_have_attribute("href", "/home/")
    expect(first).to_have_attribute("aria-current", "page")

    # The same home in Simplified Chinese: the browser asks for it.
    page.set_extra_http_headers({"Accept-Language": "zh-Hans"})
    answer = page.goto(f"{live_server.url}/home/")
    assert answer is not None
    assert answer.headers.get("content-language") == "zh-hans"
    expect(page.get_by_test_id("home-heading")).to_have_text(_chinese("Home"))
    expect(panels).to_have_count(len(PANELS[username]))
    for row in _rows(world)[username]:
        expect(page.get_by_test_id(row)).to_be_visible()
    # Every panel links to its full page, in the reader's language.
    expect(page.get_by_role("link", name=_chinese("Open the full page")).first).to_be_visible()
    assert problems == []


def test_a_developer_launches_again_from_home_into_the_filled_in_form(
    live_server,
    page: Page,
    world: World,  # noqa: F811
) -> None:
    sign_in(page, live_server.url, "dev")

    page.get_by_test_id(f"launch-again-{world.notebook.pk}").click()

    expect(page).to_have_url(re.compile(r"/notebooks/new/\?tenant=vision&"))
    expect(page.get_by_label("Tenant")).to_have_value("vision")
    expect(page.get_by_label("Image")).to_have_value("minimal-python")


def test_without_javascript_each_panel_opens_on_a_page_of_its_own(
    live_server,
    browser: Browser,
    world: World,  # noqa: F811
) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page, live_server.url, "dev")
        expect(page).to_have_url(re.compile(r"/home/$"))
        # The Home names each panel; nothing loads it, so its link opens it.
        expect(page.get_by_test_id("home-panel-my-notebooks")).to_contain_text("My notebooks")
        expect(page.get_by_test_id(f"home-notebook-{world.notebook.pk}")).to_have_count(0)
        page.get_by_test_id("home-show-my-notebooks").click()
        expect(page).to_have_url(re.compile(r"/home/panels/my-notebooks/$"))
        expect(page.get_by_test_id(f"home-notebook-{world.notebook.pk}")).to_be_visible()
        page.get_by_test_id("home-back").click()
        expect(page).to_have_url(re.compile(r"/home/$"))
    finally:
        context.close()


def test_a_panel_that_fails_to_load_says_so_and_leaves_the_others(
    live_server,
    page: Page,
    world: World,  # noqa: F811
) -> None:
    # The server's answer to one panel is lost on the way (at the network edge, in the browser).
    page.route("**/home/panels/my-cost/", lambda route: route.fulfill(status=502, body="down"))

    sign_in(page, live_server.url, "dev")

    expect(page.get_by_test_id(f"home-notebook-{world.notebook.pk}")).to_be_visible()
    failed = page.get_by_test_id("home-failed-my-cost")
    expect(failed).to_be_visible()
    expect(failed).to_have_text(
        "This panel could not be loaded. Its link opens it on a page of its own."
    )
    expect(page.get_by_test_id("home-panel-my-cost")).to_have_attribute("aria-busy", "false")
    expect(page.get_by_test_id("home-show-my-cost")).to_be_visible()
    expect(page.get_by_test_id("home-failed-my-notebooks")).to_have_count(0)
