"""A tenant's page shows its policy at once and loads each section on its own (issue 19): each
section answers at its own address, to htmx a fragment and without JavaScript the page with it,
and runs as many queries whatever the data."""

import re

import pytest
from django.db import connection
from django.template import Context, Template
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from portal.accounts.services import user_create
from tenants.models import MemberRole
from tenants.page_rows import member_row
from tenants.services import membership_set, quota_set
from tests.loaded import page_loaded
from tests.tenants.factories import a100

SECTIONS = ["provisioning", "budget", "quotas", "members", "quota-requests"]


@pytest.fixture
def a100_model(admin_user):
    return a100(admin_user)


def _placeholders(page: str) -> list[str]:
    return re.findall(r'data-testid="tenant-section-([a-z-]+)"', page)


def test_the_page_holds_each_section_s_title_and_link_until_htmx_loads_it(
    client_for, lead, tenant_a
) -> None:
    client = client_for(lead)
    page = client.get(f"/tenants/{tenant_a.slug}/").content.decode()
    loaded = page_loaded(client, f"/tenants/{tenant_a.slug}/")

    assert _placeholders(page) == SECTIONS
    assert _placeholders(loaded) == []
    for section_id in ("provisioning", "budget", "quotas", "members", "quota-requests"):
        assert f'id="{section_id}"' in loaded
    assert f'hx-get="/tenants/{tenant_a.slug}/sections/members/" hx-trigger="load"' in page
    assert f'href="/tenants/{tenant_a.slug}/sections/members/#members"' in page
    assert 'id="members"' not in page  # not written until loaded
    assert "Usage" in page  # a link, written in the page


def test_a_section_answers_htmx_with_its_fragment_and_a_page_without_javascript(
    client_for, lead, tenant_a
) -> None:
    client = client_for(lead)
    url = f"/tenants/{tenant_a.slug}/sections/members/"

    fragment = client.get(url, HTTP_HX_REQUEST="true")
    page = client.get(url)

    assert fragment.content.decode().lstrip().startswith('<section class="card" id="members">')
    assert "HX-Request" in fragment["Vary"]
    assert "<html" in page.content.decode()
    assert 'id="members"' in page.content.decode()
    assert _placeholders(page.content.decode()) == [s for s in SECTIONS if s != "members"]


def test_sections_are_not_found_for_outsiders_nor_those_the_viewer_does_not_get(
    client_for, outsider, developer, lead, tenant_a
) -> None:
    base = f"/tenants/{tenant_a.slug}/sections"

    assert client_for(outsider).get(f"{base}/members/").status_code == 404
    assert client_for(lead).get(f"{base}/nothing/").status_code == 404
    assert client_for(lead).get(f"{base}/usage/").status_code == 404  # a link, in the page
    # A budget is for leads, finance and admins: a developer gets no budget section.
    assert client_for(developer).get(f"{base}/budget/", HTTP_HX_REQUEST="true").status_code == 404
    assert "budget" not in _placeholders(
        client_for(developer).get(f"/tenants/{tenant_a.slug}/").content.decode()
    )
    assert client_for(lead).get(f"{base}/budget/", HTTP_HX_REQUEST="true").status_code == 200


def test_a_refused_form_without_javascript_shows_the_page_with_its_section_and_errors(
    client_for, lead, tenant_a
) -> None:
    response = client_for(lead).post(
        f"/tenants/{tenant_a.slug}/members/", {"username": "nobody", "role": "developer"}
    )

    page = response.content.decode()
    assert response.status_code == 400
    assert 'id="members"' in page
    assert "Username: There is no active user with this username." in page
    assert "members" not in _placeholders(page)


@pytest.mark.parametrize("name", SECTIONS)
def test_each_section_runs_as_many_queries_with_more_data(
    client_for, lead, admin_user, tenant_a, a100_model, name
) -> None:
    client = client_for(lead)
    url = f"/tenants/{tenant_a.slug}/sections/{name}/"

    def queries() -> int:
        client.get(url, HTTP_HX_REQUEST="true")  # first-call caches are not the point
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
        return len(captured.captured_queries)

    def more(round_number: int) -> None:
        for index in range(3):
            user = user_create(actor=None, username=f"more-{round_number}-{index}")
            membership_set(actor=admin_user, tenant=tenant_a, user=user, role=MemberRole.DEVELOPER)
        quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq=2 + round_number)

    more(1)
    before = queries()
    more(2)

    assert queries() == before
    assert before <= 8


# The member rows as templates/tenants/detail.html wrote them with a template loop.
MEMBER_ROWS = """{% for membership in memberships %}<tr data-testid="member-{{ membership.user.username }}"><td>{{ membership.user.get_full_name|default:membership.user.username }}</td><td>{{ membership.user.username }}</td><td>{{ membership.get_role_display }}</td>{% if removable %}<td><form method="post" action="{% url 'tenants:member-remove' slug membership.user.username %}" class="inline" hx-post="{% url 'tenants:member-remove' slug membership.user.username %}" hx-target="body" hx-swap="beforeend"><input type="hidden" name="csrfmiddlewaretoken" value="{{ token }}"><button type="submit" class="link">Remove</button></form></td>{% endif %}</tr>{% endfor %}"""  # noqa: E501


@pytest.mark.parametrize("removable", [True, False])
def test_member_rows_are_written_as_the_template_loop_wrote_them(
    tenant_a, lead, developer, removable
) -> None:
    odd = user_create(actor=None, username="o'dd+name@lab", first_name="<Ann>", last_name="& Co")
    membership_set(actor=None, tenant=tenant_a, user=odd, role=MemberRole.LEAD)
    memberships = list(tenant_a.memberships.select_related("user").order_by("user__username"))
    token = 't0ken&"x'

    written = "".join(
        member_row(tenant_a.slug, csrf_token=token if removable else None)(m) for m in memberships
    )

    expected = Template(MEMBER_ROWS).render(
        Context(
            {"memberships": memberships, "slug": tenant_a.slug, "token": token,
             "removable": removable, "request": RequestFactory().get("/")}
        )
    )  # fmt: skip
    assert written == expected
    assert len(memberships) == 3
