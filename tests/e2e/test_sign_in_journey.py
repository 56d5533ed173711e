import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.conftest import PASSWORD

pytestmark = pytest.mark.browser

LEAD_NAVIGATION = [
    "Home", "My workspace", "Notebooks", "My requests", "My usage", "Capacity", "Approvals",
    "Team", "Audit log",
]  # fmt: skip
ADMIN_NAVIGATION = [
    "Home", "My workspace", "Notebooks", "My requests", "Approvals", "Chargeback", "Usage",
    "Tenants", "Quota requests", "Catalog", "Clusters", "Identity", "All requests", "Audit log",
]  # fmt: skip


@pytest.mark.parametrize(
    ("persona", "heading", "nav_links"),
    [
        (
            "developer",
            "Home",
            [
                "Home",
                "My workspace",
                "Notebooks",
                "My requests",
                "My usage",
                "Capacity",
                "Audit log",
            ],
        ),
        ("lead", "Home", LEAD_NAVIGATION),
        ("finance_user", "Home", ["Home", "Chargeback", "Usage", "All requests", "Audit log"]),
        ("admin_user", "Home", ADMIN_NAVIGATION),
    ],
)
def test_each_persona_signs_in_in_the_browser_and_lands_on_its_home(
    request: pytest.FixtureRequest, live_server, page: Page, persona: str, heading: str, nav_links
) -> None:
    user = request.getfixturevalue(persona)
    console_errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            console_errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: console_errors.append(str(error)))

    page.goto(live_server.url)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    navigation = page.get_by_role("navigation", name="Main")
    # Every link, also those in the admin's closed group menus.
    expect(navigation.locator("a")).to_have_text(nav_links)
    expect(page.get_by_test_id("current-user")).to_have_text(user.get_full_name())
    # htmx is served from our own static files and loads under the Content Security Policy.
    # The script is deferred: it runs before DOMContentLoaded, which may come after the heading
    # shows; wait for it (a timeout fails the test when it never loads).
    page.wait_for_function("typeof window.htmx === 'object'", timeout=10_000)
    assert console_errors == []

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_a_wrong_password_shows_the_error_in_the_browser(
    live_server, page: Page, developer
) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("dev")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert")).to_contain_text("correct username and password")
