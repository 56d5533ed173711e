"""A developer sees only the offerings of their tenant's GPU models, grouped by model, and the
select follows the tenant; in English and in Simplified Chinese (Accept-Language zh-Hans)."""

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation
from playwright.sync_api import Browser, BrowserContext, expect

from portal.accounts.models import User
from portal.catalog.models import Offering
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set
from tests.e2e.console import console_problems

pytestmark = pytest.mark.browser

H100 = "h100-80gb-whole"


def signed_in(browser: Browser, base_url: str, user: User, language: str) -> BrowserContext:
    """A browser context with `user`'s session and `language` as its Accept-Language (the
    session is made here, so the sign-in page's own words play no part)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(extra_http_headers={"Accept-Language": language})
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base_url}])
    return context


@pytest.mark.parametrize("language", ["en", "zh-Hans"])
def test_a_developer_sees_only_the_offerings_of_their_tenants_models_grouped_by_model(
    live_server, browser: Browser, developer, admin_user, a100_tenant, tenant_b: Tenant, catalog,
    language,
) -> None:  # fmt: skip
    membership_set(actor=None, tenant=tenant_b, user=developer, role=MemberRole.DEVELOPER)
    h100 = catalog[H100].gpu_model
    quota_set(actor=admin_user, tenant=tenant_b, gpu_model=h100, gpu_eq=4)
    a100 = catalog["a100-80gb-whole"].gpu_model
    a100_offerings = Offering.objects.filter(enabled=True, gpu_model=a100).count()
    h100_offerings = Offering.objects.filter(enabled=True, gpu_model=h100).count()
    with translation.override(language.lower()):
        placeholder = translation.gettext("Choose a GPU model and size")
    if language != "en":
        assert placeholder != "Choose a GPU model and size", "compile the zh_Hans catalog first"

    page = signed_in(browser, live_server.url, developer, language).new_page()
    problems = console_problems(page)
    page.goto(f"{live_server.url}/requests/new/")
    select = page.get_by_test_id("offering-select")
    tenant = page.locator("#id_tenant")

    tenant.select_option("nlp")
    expect(select.locator("optgroup")).to_have_count(1)
    expect(select.locator("optgroup")).to_have_attribute("label", h100.name)
    expect(select.locator("option[value]:not([value=''])")).to_have_count(h100_offerings)
    expect(select.locator("option").first).to_have_text(placeholder)

    tenant.select_option("vision")
    expect(select.locator("optgroup")).to_have_attribute("label", a100.name)
    expect(select.locator("option[value]:not([value=''])")).to_have_count(a100_offerings)
    expect(select.locator(f"option[value='{H100}']")).to_have_count(0)
    whole = select.locator("option[value='a100-80gb-whole']")
    expect(whole).to_contain_text(f"{a100.name} · 1 GPU")

    select.select_option("a100-80gb-whole")
    expect(page.get_by_test_id("decision-path")).to_have_class("path approved")
    expect(page.get_by_test_id("quota-after")).to_contain_text("9")
    assert problems == []
