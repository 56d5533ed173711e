"""The Django admin shows and never writes: services own every change (issue 17)."""

from django.contrib import admin
from django.test import Client, RequestFactory

from portal.accounts.models import GlobalRole, User
from portal.cluster.models import ProvisioningRun
from portal.core.models import AuditEvent, WorkerHeartbeat
from tenants.models import Tenant, TenantState

NOTE = "Read-only here: a change saved in the Django admin would be neither audited nor"


def _side_effects() -> tuple[int, int]:
    return AuditEvent.objects.count(), ProvisioningRun.objects.count()


def test_no_admin_page_lets_a_superuser_add_change_delete_or_run_actions(admin_user) -> None:
    request = RequestFactory().get("/django-admin/")
    request.user = admin_user
    assert admin_user.is_superuser
    registered = admin.site._registry

    assert registered, "the admin registers nothing: this test would check nothing"
    for model, model_admin in registered.items():
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.has_delete_permission(request), model
        assert model_admin.get_actions(request) == {}, model
        assert model_admin.has_view_permission(request), model
        for inline in model_admin.get_inline_instances(request):
            assert not inline.has_add_permission(request, None), inline
            assert not inline.has_change_permission(request), inline
            assert not inline.has_delete_permission(request), inline


def test_the_audit_table_and_djangos_groups_have_no_admin_pages(client_for, admin_user) -> None:
    client = client_for(admin_user)

    assert AuditEvent not in admin.site._registry
    for path in (
        "/django-admin/core/auditevent/",
        "/django-admin/core/auditevent/add/",
        "/django-admin/auth/group/add/",
    ):
        assert client.get(path).status_code == 404, path
        assert client.post(path, {"action": "delete_selected"}).status_code == 404, path


def test_a_tenants_state_cannot_be_changed_in_the_django_admin(
    client_for, admin_user, tenant_a, developer
) -> None:
    client = client_for(admin_user)
    url = f"/django-admin/tenants/tenant/{tenant_a.pk}/change/"
    before = _side_effects()

    response = client.post(
        url,
        {
            "slug": tenant_a.slug,
            "name": tenant_a.name,
            "cost_centre": tenant_a.cost_centre,
            "state": TenantState.SUSPENDED,
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 403
    tenant_a.refresh_from_db()
    assert tenant_a.state == TenantState.ACTIVE
    assert _side_effects() == before


def test_the_tenants_admin_page_reads_and_says_where_to_change_it(
    client_for, admin_user, tenant_a, developer
) -> None:
    response = client_for(admin_user).get(f"/django-admin/tenants/tenant/{tenant_a.pk}/change/")

    assert response.status_code == 200
    assert NOTE in response.text
    assert f'href="/tenants/{tenant_a.slug}/"' in response.text
    assert tenant_a.cost_centre in response.text
    assert developer.username in response.text  # the memberships, read-only
    assert 'name="_save"' not in response.text


def test_a_tenant_cannot_be_added_or_deleted_in_the_django_admin(
    client_for, admin_user, tenant_a
) -> None:
    client = client_for(admin_user)
    before = _side_effects()

    added = client.post(
        "/django-admin/tenants/tenant/add/", {"slug": "new", "name": "New", "cost_centre": "CC"}
    )
    deleted = client.post(f"/django-admin/tenants/tenant/{tenant_a.pk}/delete/", {"post": "yes"})
    bulk = client.post(
        "/django-admin/tenants/tenant/",
        {"action": "delete_selected", "_selected_action": [tenant_a.pk], "post": "yes"},
    )

    assert added.status_code == 403
    assert deleted.status_code == 403
    assert bulk.status_code in (200, 302)  # the list answers, with no such action to run
    assert Tenant.objects.filter(pk=tenant_a.pk).exists()
    assert not Tenant.objects.filter(slug="new").exists()
    assert _side_effects() == before


def test_a_finance_user_cannot_be_made_admin_in_the_django_admin(
    client_for, admin_user, finance_user
) -> None:
    client = client_for(admin_user)
    url = f"/django-admin/accounts/user/{finance_user.pk}/change/"
    before = _side_effects()

    response = client.post(
        url,
        {
            "username": finance_user.username,
            "global_role": GlobalRole.ADMIN,
            "is_staff": "on",
            "is_superuser": "on",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 403
    finance_user.refresh_from_db()
    assert (finance_user.global_role, finance_user.is_staff, finance_user.is_superuser) == (
        GlobalRole.FINANCE,
        False,
        False,
    )
    assert _side_effects() == before
    finance = Client()
    finance.force_login(User.objects.get(pk=finance_user.pk))
    assert finance.get("/manage/tenants/").status_code == 404  # still no admin answers


def test_a_users_admin_page_reads_and_points_to_identity(client_for, admin_user, finance_user):
    client = client_for(admin_user)

    response = client.get(f"/django-admin/accounts/user/{finance_user.pk}/change/")
    password = client.post(
        f"/django-admin/accounts/user/{finance_user.pk}/password/",
        {"password1": "an0ther-Passw0rd!", "password2": "an0ther-Passw0rd!"},
    )

    assert response.status_code == 200
    assert NOTE in response.text
    assert 'href="/accounts/identity/"' in response.text
    assert finance_user.email in response.text
    assert password.status_code == 403
    finance_user.refresh_from_db()
    assert not finance_user.check_password("an0ther-Passw0rd!")


def test_every_admin_list_and_change_page_renders_for_reading(
    client_for, admin_user, tenant_a, developer
) -> None:
    WorkerHeartbeat.objects.create(worker="celery@test", beat_at="2026-01-01T00:00:00Z")
    Client().post("/accounts/login/", {"username": "dev", "password": "wrong"})  # an attempt
    client = client_for(admin_user)

    for model in admin.site._registry:
        opts = model._meta
        listing = client.get(f"/django-admin/{opts.app_label}/{opts.model_name}/")
        assert listing.status_code == 200, model
        row = model._default_manager.first()
        assert row is not None, f"no {model} row to show: this test would not look at its form"
        change = client.get(f"/django-admin/{opts.app_label}/{opts.model_name}/{row.pk}/change/")
        assert change.status_code == 200, model
        assert NOTE in change.text, model
