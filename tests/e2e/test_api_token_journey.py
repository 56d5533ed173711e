import re

import pytest
import requests
from playwright.sync_api import Page, expect

from tests.conftest import PASSWORD

pytestmark = pytest.mark.browser


def test_a_developer_creates_a_token_uses_it_on_the_api_and_revokes_it(
    live_server, page: Page, developer
) -> None:
    me = f"{live_server.url}/api/v1/me"
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill(developer.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Home")

    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")
    page.get_by_label("Name").fill("laptop CLI")
    page.get_by_label("Expires in").select_option(label="30 days")
    page.get_by_role("button", name="Create token").click()

    issued = page.get_by_test_id("token-issued")
    expect(issued).to_contain_text("Copy it now, it will not be shown again.")
    token = page.get_by_test_id("new-token").input_value()
    assert re.fullmatch(r"gpp_[A-Za-z0-9_-]{43}", token)
    headers = {"Authorization": f"Bearer {token}"}
    used = requests.get(me, headers=headers, timeout=10)
    assert used.status_code == 200
    assert used.json()["username"] == developer.username

    page.goto(f"{live_server.url}/account/tokens/")  # shown once: not after a reload
    expect(page.get_by_test_id("token-issued")).to_have_count(0)
    row = page.get_by_role("row").filter(has_text="laptop CLI")
    expect(row).to_contain_text(token[:12])
    expect(row.get_by_test_id("token-state")).to_have_text("active")

    row.get_by_role("button", name="Revoke").click()  # asks first, in a dialog on the page
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading")).to_have_text("Revoke “laptop CLI”?")
    expect(dialog).to_contain_text("gets 401 from the API from now on")
    expect(row.get_by_test_id("token-state")).to_have_text("active")
    dialog.get_by_role("button", name="Revoke token").click()
    expect(row.get_by_test_id("token-state")).to_have_text("revoked")
    expect(page.get_by_role("status")).to_contain_text("was revoked")

    refused = requests.get(me, headers=headers, timeout=10)
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "This API token was revoked."
