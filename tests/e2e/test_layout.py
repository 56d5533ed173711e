"""Every persona's main pages fit a phone (390 px wide: nothing wider than the viewport), and the
admin's navigation fits one line at 1280 px with Sign out in view."""

import pytest
from playwright.sync_api import Browser, FloatRect, Page, expect

from portal.allocations.services import gpu_request_submit
from tests.conftest import PASSWORD

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}


def signed_in(browser: Browser, base_url: str, username: str, viewport: dict[str, int]) -> Page:
    page = browser.new_context(viewport=viewport).new_page()  # type: ignore[arg-type]
    page.goto(f"{base_url}/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form[action$='/accounts/login/'] button[type=submit]").click()
    expect(page.get_by_test_id("sign-out")).to_be_visible()
    return page


def main_pages(page: Page) -> list[str]:
    """The persona's pages, from its own navigation, then the page of its first tenant."""
    links = page.locator("[data-testid=nav-menu] nav a")
    return list(dict.fromkeys(links.evaluate_all("links => links.map(link => link.href)")))


def too_wide(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


# The innermost elements reaching past the viewport's right edge: what to fix on a wide page.
OVERFLOWING = """width => {
  const past = element => element.getBoundingClientRect().right > width + 1;
  const name = element => element.tagName.toLowerCase() + (element.id ? "#" + element.id : "")
    + (typeof element.className === "string" && element.className
      ? "." + element.className.trim().replace(/ +/g, ".") : "");
  return [...document.querySelectorAll("body *")]
    .filter(element => past(element) && ![...element.children].some(past))
    .slice(0, 5)
    .map(element => name(element) + " " + Math.round(element.getBoundingClientRect().right));
}"""


@pytest.fixture
def busy_tenant(developer, lead, finance_user, admin_user, a100_tenant, catalog):
    """Tenant vision with a pending and an approved request, so the lists have rows."""
    for count in (1, 2):
        gpu_request_submit(
            actor=developer,
            tenant=a100_tenant,
            offering=catalog["a100-80gb-whole"],
            count=count,
            duration_hours=8,
            purpose="notebook",
            justification="a long justification that wraps across the narrow screen " * 3,
        )
    return a100_tenant


@pytest.mark.parametrize("username", ["dev", "lead", "finance", "admin"])
def test_every_main_page_of_each_persona_fits_390_px(
    live_server, browser: Browser, busy_tenant, username
) -> None:
    page = signed_in(browser, live_server.url, username, PHONE)
    urls = main_pages(page)
    assert urls
    if username != "finance":
        urls.append(f"{live_server.url}/tenants/vision/")
    urls.append(f"{live_server.url}/account/tokens/")
    wide = {}
    for url in urls:
        page.goto(url)
        width = too_wide(page)
        if width > PHONE["width"]:
            culprits = page.evaluate(OVERFLOWING, PHONE["width"])
            wide[url.removeprefix(live_server.url)] = (width, culprits)
    assert wide == {}


@pytest.mark.parametrize("username", ["dev", "admin"])
def test_the_menu_opens_on_a_phone_and_sign_out_stays_in_view(
    live_server, browser: Browser, busy_tenant, username
) -> None:
    page = signed_in(browser, live_server.url, username, PHONE)
    expect(page.get_by_test_id("nav-wide")).to_be_hidden()
    expect(page.get_by_test_id("sign-out")).to_be_in_viewport()
    menu = page.get_by_test_id("nav-menu")
    menu.locator("summary").click()
    navigation = page.get_by_role("navigation", name="Main")
    expect(navigation.get_by_role("link", name="Audit log")).to_be_visible()
    navigation.get_by_role("link", name="Audit log").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit log")
    assert too_wide(page) <= PHONE["width"]


def test_the_admin_navigation_fits_one_line_at_1280_px(
    live_server, browser: Browser, busy_tenant
) -> None:
    page = signed_in(browser, live_server.url, "admin", LAPTOP)
    navigation = page.get_by_test_id("nav-wide")
    expect(navigation).to_be_visible()
    tops = navigation.locator(":scope > ul > li").evaluate_all(
        "items => items.map(item => Math.round(item.getBoundingClientRect().top))"
    )
    assert len(tops) >= 4
    assert len(set(tops)) == 1, tops
    expect(page.get_by_test_id("sign-out")).to_be_in_viewport()
    assert too_wide(page) <= LAPTOP["width"]
    # The pending count shows on the Approvals entry (the admin's Team group holds only it).
    approvals = navigation.get_by_role("link", name="Approvals")
    expect(approvals).to_be_visible()
    expect(approvals.get_by_test_id("nav-count")).to_contain_text("1")
    # A group menu opens, and closes again on a click elsewhere.
    navigation.get_by_text("Admin", exact=True).click()
    identity = navigation.get_by_role("link", name="Identity")
    expect(identity).to_be_visible()
    page.locator("main h1").click()
    expect(identity).to_be_hidden()


def test_a_skip_link_leads_to_the_main_content(live_server, browser: Browser, developer) -> None:
    page = signed_in(browser, live_server.url, "dev", LAPTOP)
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to main content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()


# Whether two boxes (x, y, width, height) share any area.
def overlap(one: FloatRect, other: FloatRect) -> bool:
    return not (
        one["x"] + one["width"] <= other["x"]
        or other["x"] + other["width"] <= one["x"]
        or one["y"] + one["height"] <= other["y"]
        or other["y"] + other["height"] <= one["y"]
    )


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280", "390"])
@pytest.mark.parametrize("language", ["en", "zh-Hans"])
def test_the_language_switcher_fits_beside_the_time_zone_before_and_after_sign_in(
    live_server, browser: Browser, developer, viewport, language
) -> None:
    context = browser.new_context(
        viewport=viewport,
        extra_http_headers={"Accept-Language": language},
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    for moment in ("sign-in page", "signed in"):
        parts = {
            name: page.get_by_test_id(name).bounding_box()
            for name in ("language-select", "language-submit", "time-zone")
        }
        boxes = {name: box for name, box in parts.items() if box is not None}
        assert len(boxes) == 3, (moment, parts)
        names = list(boxes)
        crossing = [
            (one, other)
            for index, one in enumerate(names)
            for other in names[index + 1 :]
            if overlap(boxes[one], boxes[other])
        ]
        assert crossing == [], (moment, boxes)
        assert all(box["x"] + box["width"] <= viewport["width"] for box in boxes.values()), moment
        assert too_wide(page) <= viewport["width"], moment
        if moment == "sign-in page":
            page.locator("#id_username").fill("dev")
            page.locator("#id_password").fill(PASSWORD)
            page.locator("form[action$='/accounts/login/'] button[type=submit]").click()
            expect(page.get_by_test_id("sign-out")).to_be_attached()
