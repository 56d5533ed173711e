import re
from fractions import Fraction

import pytest
from django.template import engines
from django.utils import translation

from portal.core.models import AuditEvent
from tenants.models import Membership, Quota, QuotaRequest, Tenant
from tenants.selectors import quota_lines_for
from tenants.services import (
    quota_request_create,
    quota_set,
    tenant_change_state,
    tenant_create,
)
from tests.loaded import page_loaded
from tests.tenants.factories import a100, t4


@pytest.fixture
def a100_model(admin_user):
    return a100(admin_user)


def test_admin_creates_a_tenant_from_the_form(client_for, admin_user) -> None:
    client = client_for(admin_user)

    response = client.post(
        "/manage/tenants/new/",
        {
            "slug": "risk",
            "name": "Risk Analytics",
            "cost_centre": "CC-7300",
            "auto_approve_gpu_eq": "1/2",
            "auto_approve_hours": 4,
            "default_duration_hours": 8,
            "max_duration_hours": 72,
            "cpu_cores_quota": 32,
            "memory_gib_quota": 128,
            "storage_gib_quota": 512,
        },
    )

    assert response.status_code == 302
    assert response["Location"] == "/tenants/risk/"
    tenant = Tenant.objects.get(slug="risk")
    assert tenant.auto_approve_gpu_eq == Fraction(1, 2)
    event = AuditEvent.objects.get(action="tenant.create", target_id=str(tenant.pk))
    assert event.actor == admin_user
    assert event.changes["slug"] == [None, "risk"]
    assert event.request_id
    assert event.source_ip == "127.0.0.1"


def test_bad_tenant_form_names_the_field_and_writes_nothing(client_for, admin_user) -> None:
    client = client_for(admin_user)
    base = {"name": "X", "auto_approve_gpu_eq": "1", "auto_approve_hours": 1,
            "default_duration_hours": 8, "max_duration_hours": 8, "cpu_cores_quota": 1,
            "memory_gib_quota": 1, "storage_gib_quota": 1}  # fmt: skip

    bad_slug = client.post("/manage/tenants/new/", {**base, "slug": "Not A Slug"})
    bad_gpu_eq = client.post(
        "/manage/tenants/new/", {**base, "slug": "ok", "auto_approve_gpu_eq": "two"}
    )
    too_long = client.post(
        "/manage/tenants/new/", {**base, "slug": "ok2", "default_duration_hours": 9}
    )

    assert bad_slug.status_code == 400
    assert "Slug: Use 1 to 61 lowercase letters" in bad_slug.text
    assert bad_gpu_eq.status_code == 400
    assert "Auto-approve up to (GPU-eq per request): " in bad_gpu_eq.text
    assert too_long.status_code == 400
    assert "Default duration (hours): Must not be longer than the maximum" in too_long.text
    assert not Tenant.objects.exists()
    assert not AuditEvent.objects.filter(action="tenant.create").exists()


def test_duplicate_slug_is_refused_naming_the_field(client_for, admin_user, tenant_a) -> None:
    response = client_for(admin_user).post(
        "/manage/tenants/new/",
        {"slug": tenant_a.slug, "name": "Again", "auto_approve_gpu_eq": "1",
         "auto_approve_hours": 1, "default_duration_hours": 1, "max_duration_hours": 1,
         "cpu_cores_quota": 1, "memory_gib_quota": 1, "storage_gib_quota": 1},
    )  # fmt: skip

    assert response.status_code == 409
    assert "Slug: Taken." in response.text


def test_admin_sets_a_quota_inline_with_htmx(client_for, admin_user, tenant_a, a100_model) -> None:
    response = client_for(admin_user).post(
        f"/tenants/{tenant_a.slug}/quotas/",
        {"gpu_model": a100_model.slug, "gpu_eq": "7/2"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<section class="card" id="quotas">')
    assert "<html" not in response.text
    assert 'title="7/2"' in response.text
    assert Quota.objects.get(tenant=tenant_a).gpu_eq == Fraction(7, 2)
    event = AuditEvent.objects.get(action="quota.set")
    assert event.changes == {"gpu_eq": ["0", "7/2"]}
    assert event.tenant == tenant_a


def test_a_bad_quota_names_the_field(client_for, admin_user, tenant_a, a100_model) -> None:
    response = client_for(admin_user).post(
        f"/tenants/{tenant_a.slug}/quotas/",
        {"gpu_model": a100_model.slug, "gpu_eq": "lots"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 400
    assert "Quota (GPU-eq): " in response.text
    assert not Quota.objects.exists()


def test_lead_sees_quota_and_remaining_on_the_tenant_page(
    client_for, lead, admin_user, tenant_a, a100_model
) -> None:
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq=8)

    page = page_loaded(client_for(lead), f"/tenants/{tenant_a.slug}/")

    assert 'data-testid="quota-a100-80gb"' in page
    assert "Set quota" not in page  # admins only
    assert "Ask for more quota" in page


def test_lead_adds_and_removes_a_member(client_for, lead, outsider, tenant_a) -> None:
    client = client_for(lead)

    added = client.post(
        f"/tenants/{tenant_a.slug}/members/", {"username": "outsider", "role": "developer"}
    )
    asked = client.post(f"/tenants/{tenant_a.slug}/members/outsider/remove/")
    removed = client.post(
        f"/tenants/{tenant_a.slug}/members/outsider/remove/", {"confirmed": "yes"}
    )

    assert added.status_code == 302
    assert asked.status_code == 200
    assert removed.status_code == 302
    assert not Membership.objects.filter(tenant=tenant_a, user=outsider).exists()
    actions = list(AuditEvent.objects.filter(tenant=tenant_a).values_list("action", flat=True))
    assert actions[:2] == ["membership.remove", "membership.add"]


def test_adding_an_unknown_user_names_the_field(client_for, lead, tenant_a) -> None:
    response = client_for(lead).post(
        f"/tenants/{tenant_a.slug}/members/", {"username": "nobody", "role": "developer"}
    )

    assert response.status_code == 400
    assert "Username: There is no active user with this username." in response.text


def test_developer_may_not_manage_members(client_for, developer, tenant_a) -> None:
    response = client_for(developer).post(
        f"/tenants/{tenant_a.slug}/members/", {"username": "dev", "role": "lead"}
    )

    assert response.status_code == 403
    assert Membership.objects.get(user=developer).role == "developer"


def test_outsider_gets_404_for_everything_in_another_tenant(client_for, outsider, tenant_a) -> None:
    client = client_for(outsider)
    slug = tenant_a.slug

    assert client.get(f"/tenants/{slug}/").status_code == 404
    assert (
        client.post(
            f"/tenants/{slug}/members/", {"username": "outsider", "role": "lead"}
        ).status_code
        == 404
    )
    assert client.post(f"/tenants/{slug}/quota-requests/", {}).status_code == 404
    assert client.get(f"/tenants/{slug}/edit/").status_code == 404
    assert not Membership.objects.filter(tenant=tenant_a, user=outsider).exists()


def test_lead_asks_for_quota_and_admin_approves_it(
    client_for, lead, admin_user, tenant_a, a100_model
) -> None:
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq=2)

    asked = client_for(lead).post(
        f"/tenants/{tenant_a.slug}/quota-requests/",
        {"gpu_model": a100_model.slug, "amount": "3/2", "reason": "Training run"},
    )
    quota_request = QuotaRequest.objects.get()
    decided = client_for(admin_user).post(
        f"/tenants/{tenant_a.slug}/quota-requests/{quota_request.pk}/decide/",
        {"decision": "approve", "comment": "ok"},
    )
    again = client_for(admin_user).post(
        f"/tenants/{tenant_a.slug}/quota-requests/{quota_request.pk}/decide/",
        {"decision": "reject"},
    )

    assert asked.status_code == 302
    assert decided.status_code == 302
    assert Quota.objects.get(tenant=tenant_a).gpu_eq == Fraction(7, 2)
    assert again.status_code == 409
    assert "is approved, not pending" in again.text


def test_developer_may_not_ask_for_quota(client_for, developer, tenant_a, admin_user) -> None:
    model = t4(admin_user)

    response = client_for(developer).post(
        f"/tenants/{tenant_a.slug}/quota-requests/",
        {"gpu_model": model.slug, "amount": "1", "reason": "please"},
    )

    assert response.status_code == 403
    assert not QuotaRequest.objects.exists()


def test_admin_queue_lists_pending_quota_requests(client_for, lead, admin_user, tenant_a) -> None:
    model = t4(admin_user)
    quota_request_create(actor=lead, tenant=tenant_a, gpu_model=model, amount=2, reason="inference")

    response = client_for(admin_user).get("/manage/quota-requests/")

    assert response.status_code == 200
    assert "inference" in response.text


def test_suspending_an_archived_tenant_is_a_conflict(client_for, admin_user, tenant_a) -> None:
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")

    response = client_for(admin_user).post(
        f"/tenants/{tenant_a.slug}/state/", {"action": "suspend", "confirmed": "yes"}
    )

    assert response.status_code == 409
    assert "is archived; it cannot suspend" in response.text
    tenant_a.refresh_from_db()
    assert tenant_a.state == "archived"


def test_tenant_search_filters_and_htmx_gets_the_table_only(
    client_for, admin_user, tenant_a, tenant_b
) -> None:
    response = client_for(admin_user).get("/manage/tenants/?q=vision", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<div id="tenant-table">')
    assert tenant_a.name in response.text
    assert tenant_b.name not in response.text


@pytest.mark.parametrize("count", [5, 500])
def test_tenants_list_runs_the_same_queries_for_5_and_500_tenants(
    client_for, admin_user, a100_model, django_assert_num_queries, count
) -> None:
    for number in range(count):
        tenant = tenant_create(actor=admin_user, slug=f"team-{number:03}", name=f"Team {number}")
        quota_set(actor=admin_user, tenant=tenant, gpu_model=a100_model, gpu_eq=number % 7 + 1)
    client = client_for(admin_user)
    client.get("/manage/tenants/")  # the process reads the catalog once (catalog/cache.py)

    # session + user, persona, pending approvals and extensions (navigation, one query), page
    # of tenants (with their member counts), its count when it is full (a page that ends the
    # list is counted from its rows), quotas (their GPU models from the process's catalog
    # rows), allocations
    with django_assert_num_queries(7 if count > 25 else 6):
        response = client.get("/manage/tenants/")

    assert response.status_code == 200
    assert f"({count} tenants)" in response.text or count <= 25


def test_an_empty_tenant_form_says_what_is_missing(client_for, admin_user) -> None:
    response = client_for(admin_user).post("/manage/tenants/new/", {})

    assert response.status_code == 400
    assert "Slug: This field is required." in response.text


def test_the_tenants_list_counts_each_tenants_members(
    client_for, admin_user, developer, lead, outsider
) -> None:
    """vision has a developer and a lead, nlp the outsider, an empty tenant none (counted per
    listed tenant in a subquery: zero, not missing)."""
    tenant_create(actor=admin_user, slug="empty", name="Nobody Yet")
    page: str = client_for(admin_user).get("/manage/tenants/").text

    def members_of(slug: str) -> str:
        row = page[page.index(f"<small>{slug}</small>") :]
        row = row[: row.index("</tr>")]
        return row.split("<td>")[3].split("</td>")[0]

    assert members_of("vision") == "2"
    assert members_of("nlp") == "1"
    assert members_of("empty") == "0"


# The rows as templates/tenants/manage.html wrote them, with _quota_cells.html in place.
TENANT_ROWS = """{% load i18n gpu_eq %}{% for tenant, lines in rows %}
        <tr>
          <td><a href="{% url 'tenants:detail' tenant.slug %}">{{ tenant.name }}</a> <small>{{ tenant.slug }}</small></td>
          <td>{{ tenant.cost_centre|default:"—" }}</td>
          <td><span class="state {{ tenant.state }}">{{ tenant.state_label }}</span></td>
          <td>{{ tenant.member_count }}</td>
          <td>{% for line in lines %}<span class="quota-chip{% if line.remaining <= 0 %} full{% endif %}" title="{% blocktranslate trimmed with model=line.gpu_model.name remaining=line.remaining quota=line.quota %}{{ model }}: {{ remaining }} of {{ quota }} GPU-eq left (exact){% endblocktranslate %}">{{ line.gpu_model.name }}: {{ line.remaining|gpu_eq }} / {{ line.quota|gpu_eq }}</span>{% empty %}<span class="empty">{% translate "no GPU quota" %}</span>{% endfor %}</td>
        </tr>{% endfor %}"""  # noqa: E501


def test_the_tenants_rows_are_written_as_the_template_wrote_them(
    client_for, admin_user, a100_model, tenant_a
) -> None:
    """The *Tenants* page's rows (tenants/page_rows.py) against the template loop they
    replaced, in Chinese: markup in a name, no cost centre, suspended, exact and used-up quota
    lines, no quota at all."""
    odd = tenant_create(actor=admin_user, slug="rd", name='<R&D> "labs"', cost_centre="")
    quota_set(actor=admin_user, tenant=odd, gpu_model=a100_model, gpu_eq=Fraction(7, 2))
    quota_set(actor=admin_user, tenant=odd, gpu_model=t4(admin_user), gpu_eq=0)
    tenant_change_state(actor=admin_user, tenant=odd, action="suspend")

    response = client_for(admin_user).get("/manage/tenants/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 200
    page = response.context["page"]
    lines = quota_lines_for(tenant.pk for tenant in page)
    with translation.override("zh-hans"):
        expected = (
            engines["django"]
            .from_string(TENANT_ROWS)
            .render({"rows": [(tenant, lines[tenant.pk]) for tenant in page]})
        )
    shown = re.search(r"<tbody>(.*?)</tbody>", response.text, re.S)
    assert shown
    between_tags = re.compile(r">\s+<")
    assert between_tags.sub("><", shown.group(1).strip()) == between_tags.sub(
        "><", expected.strip()
    )
    assert "&lt;R&amp;D&gt; &quot;labs&quot;" in expected
    assert 'class="quota-chip full"' in expected
    assert "7/2" in expected
