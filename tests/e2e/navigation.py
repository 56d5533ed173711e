"""Following the navigation as a person does: a link inside a menu of the wide navigation (leads
and admins see their groups as menus) is reached by opening its menu first."""

from playwright.sync_api import Page


def follow_nav(page: Page, name: str) -> None:
    """Click the navigation entry called `name`, opening the menu that holds it if need be."""
    nav = page.get_by_test_id("nav-wide")
    entry = page.get_by_role("link", name=name, include_hidden=True)  # queried inside a menu
    menu = nav.locator("details.nav-dropdown").filter(has=entry)
    if menu.count() and menu.first.get_attribute("open") is None:
        menu.first.locator("summary").click()
    nav.get_by_role("link", name=name).first.click()
