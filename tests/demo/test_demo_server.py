"""`make demo` as a visitor meets it: PORTAL_DEMO on, DEBUG off, plain HTTP on the PORT given."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import PASSWORD
from tests.demo.server import DemoServer, demo_server


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    with demo_server(Path(tmp_path_factory.mktemp("demo"))) as server:
        yield server


def test_the_demo_serves_on_the_port_given_as_port(demo: DemoServer) -> None:
    # demo_server passes the port as PORT only (no --bind), as `make demo PORT=…` does.
    port = demo.url.rsplit(":", 1)[1]

    assert port != "8000"
    assert f"Listening at: http://127.0.0.1:{port}" in demo.log_text()
    assert requests.get(f"{demo.url}/healthz", timeout=10).status_code == 200


def test_a_missing_page_is_the_portals_own_404_not_djangos_debug_page(demo: DemoServer) -> None:
    response = requests.get(f"{demo.url}/no-such-page/", timeout=10)

    assert response.status_code == 404
    assert 'class="card narrow error-page"' in response.text
    assert "URLconf" not in response.text
    assert "DEBUG = True" not in response.text


def test_static_files_are_served_with_debug_off(demo: DemoServer) -> None:
    response = requests.get(f"{demo.url}/static/css/portal.css", timeout=10)

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/css")


def test_a_person_signs_in_over_plain_http(demo: DemoServer) -> None:
    session = requests.Session()
    page = session.get(f"{demo.url}/accounts/login/", timeout=10)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert match is not None

    answer = session.post(
        f"{demo.url}/accounts/login/",
        data={"csrfmiddlewaretoken": match[1], "username": "dev", "password": PASSWORD},
        headers={"Referer": f"{demo.url}/accounts/login/"},
        timeout=30,
    )

    assert answer.status_code == 200
    assert answer.url != f"{demo.url}/accounts/login/"
    assert session.cookies.get("sessionid")


def test_the_demo_sign_in_page_lists_the_demo_accounts(demo: DemoServer) -> None:
    page = requests.get(f"{demo.url}/accounts/login/", timeout=10).text

    assert 'data-testid="demo-accounts"' in page
    assert "gpu-portal-demo" in page
    assert "nlp-dev" in page
