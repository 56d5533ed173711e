"""axe-core finds no WCAG 2.1 A/AA violation on any persona's pages, in English and in Chinese,
on a laptop (1280x800) and on a phone (390x844).

The pages are each persona's navigation items, the API tokens page, and the detail pages people
spend their day on: a tenant, the request form, a notebook, a statement (as far as the persona
may see them). axe-core comes from npm (tests/e2e/package.json, installed by the test command)
and added to each page as an init script: the browser runs those outside the portal's
Content-Security-Policy, which refuses the inline script `add_script_tag` would insert (the policy
stays on for the page's own scripts; the context does not bypass it).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize

from portal.accounts.models import User
from portal.allocations.services import gpu_request_submit
from portal.billing.pricing import current_month
from portal.billing.services import budget_set
from portal.catalog.services import gpu_pool_create, notebook_image_create, offering_create
from portal.cluster.services import cluster_create
from portal.core.navigation import navigation_for
from portal.workloads.services import notebook_launch
from tenants.models import Tenant
from tenants.services import quota_request_create, quota_set
from tests.tenants.factories import a100, mig_backend

pytestmark = pytest.mark.browser

AXE_JS = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
# WCAG 2.0 and 2.1, levels A and AA.
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
    "resultTypes": ["violations"],
}
WIDTHS: dict[str, ViewportSize] = {
    "1280": {"width": 1280, "height": 800},
    "390": {"width": 390, "height": 844},
}
# The browser's language; the portal answers zh-CN with zh-hans.
LOCALES = {"en": "en-US", "zh-hans": "zh-CN"}
PERSONAS = {
    "developer": "developer",
    "lead": "lead",
    "finance": "finance_user",
    "admin": "admin_user",
}


@dataclass(frozen=True)
class World:
    tenant: Tenant
    notebook_pk: int
    statement_id: str


@pytest.fixture
def world(tenant_a: Tenant, developer: User, lead: User, admin_user: User) -> World:
    """Tenant A with a quota, a pending request for the lead's Approvals, a quota request for
    the admins' queue, an allocation with a notebook, a budget, and this month's statement."""
    model = a100(admin_user)
    backend = mig_backend(admin_user)
    offering = offering_create(
        actor=admin_user, slug="a100-mig-1g", name="A100 1g.10gb", gpu_model=model,
        backend=backend, size="1g.10gb", resources={"nvidia.com/mig-1g.10gb": "1"}, gpu_eq="1/7",
    )  # fmt: skip
    image = notebook_image_create(
        actor=admin_user, slug="minimal", name="Minimal Python",
        image="quay.io/jupyter/minimal-notebook:2025-11-17",
    )  # fmt: skip
    quota_request_create(actor=lead, tenant=tenant_a, gpu_model=model, amount=1, reason="a course")
    quota_set(actor=None, tenant=tenant_a, gpu_model=model, gpu_eq=8)
    gpu_request_submit(
        actor=developer, tenant=tenant_a, offering=offering, count=8, justification="training"
    )
    cluster = cluster_create(actor=None, name="main")
    gpu_pool_create(
        actor=admin_user, cluster=cluster.name, name="a100-mig", gpu_model=model, backend=backend
    )
    allocation = gpu_request_submit(actor=developer, tenant=tenant_a, offering=offering, count=1)
    notebook = notebook_launch(actor=developer, allocation_id=allocation.pk, image=image.slug)
    budget_set(actor=admin_user, tenant=tenant_a, unit="gpu_eq_hours", amount="100")
    return World(
        tenant=tenant_a,
        notebook_pk=notebook.pk,
        statement_id=f"{current_month():%Y-%m}-{tenant_a.slug}",
    )


def pages_of(persona: str, world: World) -> list[str]:
    """The persona's navigation items, API tokens, and the detail pages the persona may see."""
    pages = [reverse(entry.url_name) for entry in navigation_for(persona)]
    pages.append(reverse("tokens:list"))
    slug = world.tenant.slug
    if persona in {"developer", "lead", "admin"}:
        pages += [
            reverse("tenants:detail", kwargs={"slug": slug}),
            reverse("allocations:new"),
            reverse("workloads:new"),
            reverse("workloads:detail", kwargs={"pk": world.notebook_pk}),
        ]
    if persona == "finance":
        pages.append(reverse("tenants:detail", kwargs={"slug": slug}))
    if persona in {"lead", "finance", "admin"}:
        pages.append(reverse("billing:statement", kwargs={"statement_id": world.statement_id}))
    if persona == "admin":
        pages += [reverse("directory:status"), reverse("tenants:create")]
    return list(dict.fromkeys(pages))


def resize(page: Page, viewport: ViewportSize) -> None:
    """Resize, and let the page's resize handlers run (they come before the next frame)."""
    page.set_viewport_size(viewport)
    page.evaluate(
        "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
    )


def axe_violations(page: Page) -> list[dict[str, Any]]:
    result = page.evaluate("options => axe.run(document, options)", AXE_OPTIONS)
    return list(result["violations"])


def describe(violation: dict[str, Any], where: str) -> str:
    targets = "; ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
    more = len(violation["nodes"]) - 5
    extra = f" (and {more} more)" if more > 0 else ""
    return (
        f"{where}: {violation['id']} ({violation['impact']}) {violation['help']}\n"
        f"    at {targets}{extra}"
    )


@pytest.fixture
def axe_script() -> Path:
    if not AXE_JS.exists():
        pytest.fail(
            f"{AXE_JS} is missing: the test command installs it (`make test`), or run "
            "`npm ci --prefix tests/e2e`"
        )
    return AXE_JS


@pytest.fixture
def signed_in_context(
    request: pytest.FixtureRequest,
    browser: Browser,
    live_server: Any,
    axe_script: Path,
    persona: str,
    language: str,
) -> Iterator[BrowserContext]:
    """A browser context in the language, with the persona's session cookie."""
    user = request.getfixturevalue(PERSONAS[persona])
    client = Client()
    client.force_login(user)
    context = browser.new_context(locale=LOCALES[language], viewport=WIDTHS["1280"])
    context.add_init_script(path=axe_script)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    yield context
    context.close()


@pytest.mark.parametrize("language", list(LOCALES))
@pytest.mark.parametrize("persona", list(PERSONAS))
def test_every_page_of_the_persona_has_no_axe_violations(
    signed_in_context: BrowserContext,
    live_server: Any,
    world: World,
    persona: str,
    language: str,
) -> None:
    page = signed_in_context.new_page()
    found = []
    for path in pages_of(persona, world):
        page.set_viewport_size(WIDTHS["1280"])
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None
        assert response.status == 200, f"{path} answered {response.status} to {persona}"
        assert response.headers["content-language"] == language
        # Fragments htmx loads with the page are part of what people see.
        page.wait_for_function("() => !document.querySelector('.htmx-request')")
        # The layout follows the viewport without a reload.
        for width, viewport in WIDTHS.items():
            resize(page, viewport)
            where = f"{persona} · {path} · {language} · {width} px"
            found += [describe(violation, where) for violation in axe_violations(page)]
    assert not found, f"{len(found)} axe violations:\n" + "\n".join(found)


@pytest.mark.parametrize("language", list(LOCALES))
def test_the_sign_in_page_has_no_axe_violations(
    browser: Browser, live_server: Any, axe_script: Path, language: str, settings: Any
) -> None:
    settings.PORTAL_DEMO = True  # the page lists the demo's accounts too
    context = browser.new_context(locale=LOCALES[language])
    context.add_init_script(path=axe_script)
    page = context.new_page()
    found = []
    for width, viewport in WIDTHS.items():
        resize(page, viewport)
        response = page.goto(f"{live_server.url}{reverse('accounts:login')}")
        assert response is not None
        assert response.headers["content-language"] == language
        assert page.get_by_test_id("demo-accounts").count() == 1
        where = f"anonymous · sign-in · {language} · {width} px"
        found += [describe(violation, where) for violation in axe_violations(page)]
    context.close()
    assert not found, f"{len(found)} axe violations:\n" + "\n".join(found)
