"""The CSRF token travels in a header or a POST body, never in a URL, where access logs, proxies
and browser history would keep it. Checked in the access log of the demo's own server (gunicorn
with deploy/demo/gunicorn.conf.py), which logs every request line as it arrived."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from tests.conftest import wait_until
from tests.demo.server import DemoServer, demo_server
from tests.e2e.test_tenant_admin_journey import sign_in

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoServer]:
    with demo_server(tmp_path) as server:
        yield server


def request_lines(demo: DemoServer) -> list[str]:
    """The request lines ("GET /path?query HTTP/1.1") of the server's access log."""
    return re.findall(r'"((?:GET|POST|PUT|PATCH|DELETE|HEAD) [^"]*)"', demo.log_text())


@pytest.mark.browser
def test_form_previews_send_no_csrf_token_in_the_url_and_htmx_sends_it_as_a_header(
    demo: DemoServer, page: Page
) -> None:
    htmx_requests: list[Request] = []

    def keep_htmx(request: Request) -> None:
        if "hx-request" in request.headers:
            htmx_requests.append(request)

    page.on("request", keep_htmx)
    sign_in(page, demo.url, "dev")

    page.goto(f"{demo.url}/requests/new/")
    page.get_by_label("Tenant").select_option("vision")
    page.get_by_label("GPU and size").select_option("a100-80gb-whole")
    page.get_by_label("Count").fill("2")
    expect(page.get_by_test_id("quota-after")).to_contain_text("8 of 10")
    expect(page.get_by_test_id("decision-path")).to_contain_text("Approved at once")
    page.goto(f"{demo.url}/notebooks/new/")  # its preview loads with the page
    wait_until(
        lambda: any(line.startswith("GET /notebooks/new/preview/") for line in request_lines(demo)),
        timeout=10,
        what="the launch form's preview in the access log",
    )

    lines = request_lines(demo)
    previews = [line for line in lines if line.startswith("GET /requests/preview/?")]
    assert any("offering=a100-80gb-whole" in line and "count=2" in line for line in previews), lines
    assert [line for line in lines if "csrfmiddlewaretoken" in line] == []
    assert htmx_requests
    assert all(request.headers.get("x-csrftoken") for request in htmx_requests)


def test_no_template_sends_a_form_with_its_csrf_token_by_get() -> None:
    """Forms that carry a token and also send their fields with hx-get must leave it out."""
    offenders = []
    for template in TEMPLATES.rglob("*.html"):
        for form in re.findall(r"<form\b[^>]*>.*?</form>", template.read_text(), re.DOTALL):
            opening = form[: form.index(">") + 1]
            sends_by_get = "hx-get" in opening or 'method="post"' not in opening
            if sends_by_get and "csrf_token" in form and "not csrfmiddlewaretoken" not in opening:
                offenders.append(f"{template.relative_to(TEMPLATES)}: {opening[:80]}")
    assert offenders == []
