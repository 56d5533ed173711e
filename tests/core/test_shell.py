"""The site shell: the navigation with its pending count, the portal's own error pages, and
errors shown where the eye is (htmx answers, fields' descriptions)."""

import re

from django.core.cache import caches
from django.core.cache.utils import make_template_fragment_key
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.allocations.selectors import pending_approvals_count
from portal.allocations.services import gpu_request_submit
from portal.core import navigation
from tenants.models import TenantState
from tests.loaded import page_loaded


def _submit_beyond_policy(developer, tenant, catalog, number: int) -> None:
    for _ in range(number):
        gpu_request_submit(
            actor=developer,
            tenant=tenant,
            offering=catalog["a100-80gb-whole"],
            count=2,
            duration_hours=8,
            purpose="notebook",
            justification="training",
        )


def test_every_navigation_entry_is_in_a_known_group_and_the_admin_sees_them_as_menus() -> None:
    for entry in navigation.entries.values():
        assert entry.group in navigation.GROUPS, entry.url_name
    admin_groups = [entry.group for entry in navigation.navigation_for("admin")]
    assert admin_groups == sorted(admin_groups, key=list(navigation.GROUPS).index)
    assert len(admin_groups) > navigation.FLAT_LIMIT
    assert len(navigation.navigation_for("developer")) <= navigation.FLAT_LIMIT


def test_the_approvals_entry_shows_what_the_lead_may_decide(
    client_for, developer, lead, a100_tenant, catalog
) -> None:
    _submit_beyond_policy(developer, a100_tenant, catalog, 3)
    assert GpuRequest.objects.filter(state="pending").count() == 3

    assert pending_approvals_count(lead) == 3
    assert pending_approvals_count(developer) == 0
    html = client_for(lead).get(reverse("tenants:team")).content.decode()
    assert re.search(r'href="/approvals/"[^>]*>Approvals <span class="count"[^>]*>3<', html), html


def test_the_kept_navigation_follows_the_count_the_page_and_the_language(
    client_for, developer, lead, admin_user, a100_tenant, catalog
) -> None:
    client = client_for(lead)
    team, approvals = reverse("tenants:team"), reverse("allocations:approvals")
    detail = reverse("tenants:detail", args=[a100_tenant.slug])

    def without_hidden(html: str) -> str:
        return re.sub(r"<span class=\"visually-hidden\">[^<]*</span>", "", html)

    def approvals_links(path: str) -> list[str]:
        """The Approvals link of the narrow navigation (the menu), then of the wide one."""
        html = without_hidden(client.get(path).content.decode())
        return re.findall(r'<a href="/approvals/"[^>]*>.*?</a>', html)

    def kept(user: User, path: str, block: str = "nav-wide", language: str = "en") -> str | None:
        """The HTML the header keeps for `user` on `path`, if any."""
        key = navigation.Navigation(User.objects.get(pk=user.pk), path).key
        vary_on = [key, language]
        html = caches["fragments"].get(make_template_fragment_key(block, vary_on))
        return None if html is None else without_hidden(html)

    _submit_beyond_policy(developer, a100_tenant, catalog, 1)
    counted = (
        '<a href="/approvals/">Approvals <span class="count" data-testid="nav-count">{}</span></a>'
    )
    assert approvals_links(team) == [counted.format(1)] * 2
    # Both lists of links are kept, and the same page again is drawn from them.
    assert counted.format(1) in (kept(lead, team, "nav-narrow") or "")
    assert counted.format(1) in (kept(lead, team) or "")
    assert approvals_links(team) == [counted.format(1)] * 2
    _submit_beyond_policy(developer, a100_tenant, catalog, 1)
    assert kept(lead, team) is None  # a new count is a new key: built again
    assert approvals_links(team) == [counted.format(2)] * 2
    assert all('aria-current="page"' in link for link in approvals_links(approvals))
    # Pages that are no entry's (a tenant's, a missing one) share one kept navigation; another
    # persona's is its own.
    assert approvals_links(detail) == [counted.format(2)] * 2
    assert kept(lead, "/no/such/page/") == kept(lead, detail) is not None
    assert kept(admin_user, detail) is None
    client.cookies["django_language"] = "zh-hans"
    assert all(">审批 <span" in link for link in approvals_links(team))
    assert kept(lead, team, language="zh-hans") is not None


def test_the_outsider_and_the_developer_get_no_count(
    client_for, developer, outsider, a100_tenant, catalog
) -> None:
    _submit_beyond_policy(developer, a100_tenant, catalog, 1)

    assert pending_approvals_count(outsider) == 0
    html = client_for(developer).get(reverse("tenants:mine")).content.decode()
    assert 'data-testid="nav-count"' not in html


def test_the_count_is_one_query_however_many_are_pending(
    client_for, developer, lead, admin_user, a100_tenant, catalog
) -> None:
    def count_queries(user) -> int:
        fresh = User.objects.get(pk=user.pk)  # as a request loads its user
        with CaptureQueriesContext(connection) as queries:
            pending_approvals_count(fresh)
            pending_approvals_count(fresh)  # the lead's tenants are read once per request
        return len(queries)

    _submit_beyond_policy(developer, a100_tenant, catalog, 1)
    few = (count_queries(lead), count_queries(admin_user))
    _submit_beyond_policy(developer, a100_tenant, catalog, 4)
    # One count of requests and extensions each time; a lead's tenants read once.
    assert (count_queries(lead), count_queries(admin_user)) == few == (3, 2)


def test_an_htmx_fragment_runs_no_navigation_query(client_for, lead, a100_tenant) -> None:
    client = client_for(lead)
    url = reverse("tenants:detail", args=[a100_tenant.slug])
    with CaptureQueriesContext(connection) as page:
        client.get(url)
    with CaptureQueriesContext(connection) as fragment:
        client.post(
            reverse("tenants:member-add", args=[a100_tenant.slug]),
            {"username": "nobody", "role": "developer"},
            headers={"HX-Request": "true"},
        )

    def counts(queries: CaptureQueriesContext) -> list[str]:
        return [
            query["sql"]
            for query in queries.captured_queries
            if "COUNT(*)" in query["sql"] and "'pending'" in query["sql"]
        ]

    assert len(counts(page)) == 1  # requests and extensions, in one query
    assert counts(fragment) == []


def test_a_missing_page_is_a_page_of_the_portal(client_for, developer) -> None:
    response = client_for(developer).get("/no/such/page/")

    assert response.status_code == 404
    html = response.content.decode()
    assert "<!doctype html>" in html
    assert 'data-testid="error-page"' in html
    assert 'aria-label="Main"' in html
    assert "Sign out" in html
    assert 'href="/"' in html or "Go to your start page" in html


def test_a_missing_page_for_someone_signed_out_still_has_the_layout(client) -> None:
    response = client.get("/no/such/page/")

    assert response.status_code == 404
    assert 'data-testid="error-page"' in response.content.decode()
    assert "Skip to main content" in response.content.decode()


def test_a_404_page_in_chinese(client_for, developer) -> None:
    response = client_for(developer).get("/no/such/page/", headers={"Accept-Language": "zh-Hans"})

    assert response.status_code == 404
    assert '<html lang="zh-hans">' in response.content.decode()


def test_an_htmx_error_goes_to_the_page_error_region(client_for, admin_user, tenant_a) -> None:
    # Reactivating an archived tenant, even confirmed, is an invalid transition (409), raised by
    # the service.
    tenant_a.state = TenantState.ARCHIVED
    tenant_a.save(update_fields=["state"])
    response = client_for(admin_user).post(
        reverse("tenants:state", args=[tenant_a.slug]),
        {"action": "reactivate", "confirmed": "yes"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 409
    assert response["HX-Retarget"] == "#page-errors"
    assert response["HX-Reswap"] == "innerHTML"
    html = response.content.decode()
    assert "<html" not in html
    assert 'role="alert"' in html


def test_the_same_error_without_htmx_is_a_page_with_a_way_back(
    client_for, admin_user, tenant_a
) -> None:
    tenant_a.state = TenantState.ARCHIVED
    tenant_a.save(update_fields=["state"])
    response = client_for(admin_user).post(
        reverse("tenants:state", args=[tenant_a.slug]),
        {"action": "reactivate", "confirmed": "yes"},
        headers={"Referer": "http://testserver/tenants/vision/"},
    )

    assert response.status_code == 409
    html = response.content.decode()
    assert 'data-testid="error-page"' in html
    assert 'href="http://testserver/tenants/vision/" data-testid="error-back"' in html
    assert 'data-testid="error-start"' in html


def test_a_refused_inline_form_answers_its_fragment_with_the_error_beside_the_field(
    client_for, lead, a100_tenant
) -> None:
    response = client_for(lead).post(
        reverse("tenants:member-add", args=[a100_tenant.slug]),
        {"username": "nobody-here", "role": "developer"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card" id="members">')
    assert 'aria-invalid="true"' in html
    assert 'value="nobody-here"' in html
    assert 'id="member_username_error"' in html
    assert "There is no active user with this username." in html


def test_every_described_field_points_at_an_element_that_exists(
    client_for, admin_user, a100_tenant
) -> None:
    html = page_loaded(client_for(admin_user), reverse("tenants:detail", args=[a100_tenant.slug]))
    described = re.findall(r'aria-describedby="([^"]+)"', html)
    assert described
    for ids in described:
        for element_id in ids.split():
            assert f'id="{element_id}"' in html, element_id
