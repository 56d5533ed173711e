"""A quota cannot be lowered below what allocations hold, unless an admin forces it: then the
allocations over it are named, nothing new is granted for the model until it fits, and the
tenant page says so. The page form and the API go through the same service."""

from fractions import Fraction

import pytest

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import (
    gpu_request_extend,
    gpu_request_release,
    gpu_request_submit,
)
from portal.core.errors import PermissionDenied, QuotaExceeded
from portal.core.models import AuditEvent
from tenants.models import Quota, Tenant, TenantState
from tenants.selectors import quota_lines_over
from tenants.services import quota_set
from tests.loaded import page_loaded

WHOLE = "a100-80gb-whole"


@pytest.fixture
def three_held(developer, a100_tenant, catalog):
    """Three 1-GPU allocations of vision's 10 A100 GPU-eq, oldest first."""
    held = [
        gpu_request_submit(actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1)
        for _ in range(3)
    ]
    assert all(gpu_request.state == RequestState.APPROVED for gpu_request in held)
    return held


def a100(catalog):
    return catalog[WHOLE].gpu_model


def test_lowering_below_what_is_held_is_refused_with_the_numbers(
    admin_user, a100_tenant, catalog, three_held
) -> None:
    events = AuditEvent.objects.count()

    with pytest.raises(QuotaExceeded) as refused:
        quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=a100(catalog), gpu_eq=2)

    assert "NVIDIA A100-SXM4-80GB" in refused.value.message
    assert "hold 3 GPU-eq" in refused.value.message
    assert "new quota of 2 GPU-eq" in refused.value.message
    assert list(refused.value.fields) == ["gpu_eq"]
    assert Quota.objects.get(tenant=a100_tenant).gpu_eq == 10
    assert AuditEvent.objects.count() == events


def test_lowering_down_to_what_is_held_is_allowed(
    admin_user, a100_tenant, catalog, three_held
) -> None:
    quota = quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=a100(catalog), gpu_eq=3)

    assert quota.gpu_eq == 3


def test_the_api_refuses_with_409_naming_the_model_in_the_field(
    client_for, admin_user, a100_tenant, three_held
) -> None:
    answer = client_for(admin_user).patch(
        "/api/v1/tenants/vision/",
        {"quotas": {"a100-80gb": "5/2"}},
        content_type="application/json",
    )

    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert "hold 3 GPU-eq" in error["message"]
    assert "2.5 GPU-eq" in error["message"]
    assert list(error["fields"]) == ["quotas.a100-80gb"]
    assert Quota.objects.get(tenant=a100_tenant).gpu_eq == 10


def test_the_page_form_refuses_with_409_and_the_numbers_on_the_field(
    client_for, admin_user, a100_tenant, three_held
) -> None:
    answer = client_for(admin_user).post(
        "/tenants/vision/quotas/", {"gpu_model": "a100-80gb", "gpu_eq": "1"}
    )

    assert answer.status_code == 409
    assert "hold 3 GPU-eq, more than the new quota of 1 GPU-eq" in answer.text
    assert Quota.objects.get(tenant=a100_tenant).gpu_eq == 10


def test_a_forced_quota_names_the_allocations_over_it_and_grants_nothing_more(
    client_for, developer, admin_user, a100_tenant, catalog, three_held
) -> None:
    answer = client_for(admin_user).patch(
        "/api/v1/tenants/vision/",
        {"quotas": {"a100-80gb": "1"}, "force_quotas": True},
        content_type="application/json",
    )

    assert answer.status_code == 200
    event = AuditEvent.objects.filter(action="quota.set").latest("id")
    newest_two = sorted(gpu_request.pk for gpu_request in three_held[1:])
    assert sorted(event.changes["over_quota_requests"][1]) == newest_two
    assert "Forced below what allocations hold" in event.comment
    # Nothing more for the model: a new request is refused, an extension too.
    refused = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1
    )
    assert refused.state == RequestState.REJECTED
    with pytest.raises(QuotaExceeded, match="over vision's quota"):
        gpu_request_extend(actor=developer, gpu_request=three_held[0], hours=1)
    # The tenant page says so, naming the allocations over the quota.
    page = page_loaded(client_for(admin_user), "/tenants/vision/")
    assert 'data-testid="over-quota-a100-80gb"' in page
    assert "Nothing new is approved or extended" in page
    assert ", ".join(str(pk) for pk in sorted(newest_two, reverse=True)) in page
    # Once the allocations fit again, requests are granted as before.
    for gpu_request in three_held[1:]:
        gpu_request_release(actor=developer, gpu_request=gpu_request)
    page = page_loaded(client_for(admin_user), "/tenants/vision/")
    assert "over-quota-a100-80gb" not in page
    gpu_request_release(actor=developer, gpu_request=three_held[0])
    granted = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1
    )
    assert granted.state == RequestState.APPROVED


def test_only_an_admin_forces_a_quota(lead, a100_tenant, catalog, three_held) -> None:
    with pytest.raises(PermissionDenied):
        quota_set(actor=lead, tenant=a100_tenant, gpu_model=a100(catalog), gpu_eq=1, force=True)


def test_raising_a_forced_quota_that_stays_below_what_is_held_is_allowed(
    admin_user, a100_tenant, catalog, three_held
) -> None:
    model = a100(catalog)
    quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=model, gpu_eq=1, force=True)

    raised = quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=model, gpu_eq="5/2")

    assert raised.gpu_eq == Fraction(5, 2)


def test_a_quota_is_over_only_when_more_than_it_is_held_exactly(
    admin_user, developer, a100_tenant, tenant_b, catalog
) -> None:
    """Seven 1/7 slices and a half GPU hold 3/2 exactly: a quota of 3/2 is not over, 10/7 is;
    the tenants may be given as a query of ids (the admin's home gives all active ones)."""
    slice_ = catalog["a100-80gb-mig-1g-10gb"]
    model = slice_.gpu_model
    quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=model, gpu_eq=Fraction(3, 2))
    held = [
        GpuRequest(
            tenant=a100_tenant,
            requester=developer,
            offering=slice_,
            gpu_model=model,
            count=1,
            state=RequestState.ACTIVE,
            gpu_eq_num=1,
            gpu_eq_den=7,
        )
        for _ in range(7)
    ]
    held.append(
        GpuRequest(
            tenant=a100_tenant, requester=developer, offering=slice_, gpu_model=model, count=1,
            state=RequestState.APPROVED, gpu_eq_num=1, gpu_eq_den=2,
        )
    )  # fmt: skip
    GpuRequest.objects.bulk_create(held)
    active = Tenant.objects.filter(state=TenantState.ACTIVE).values("pk")

    assert quota_lines_over(active) == []
    assert quota_lines_over([a100_tenant.pk, tenant_b.pk]) == []

    quota_set(
        actor=admin_user, tenant=a100_tenant, gpu_model=model, gpu_eq=Fraction(10, 7), force=True
    )
    over = quota_lines_over(active)
    assert [(tenant_id, line.quota, line.used) for tenant_id, line in over] == [
        (a100_tenant.pk, Fraction(10, 7), Fraction(3, 2))
    ]
    assert quota_lines_over([tenant_b.pk]) == []


def test_a_line_whose_float_sum_falls_short_of_its_quota_is_still_found_over(
    admin_user, developer, a100_tenant, catalog
) -> None:
    """PostgreSQL picks the lines that may be over by a float sum, which for ten tenths is
    0.9999999999999999: a quota of 1 held by ten tenths is not over, and one held by ten
    tenths and 10**-17 more is, though its float sum stays 0.9999999999999999, below it."""
    slice_ = catalog["a100-80gb-mig-1g-10gb"]
    model = slice_.gpu_model
    quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=model, gpu_eq=1)

    def hold(numerator: int, denominator: int) -> None:
        GpuRequest.objects.create(
            tenant=a100_tenant, requester=developer, offering=slice_, gpu_model=model, count=1,
            state=RequestState.ACTIVE, gpu_eq_num=numerator, gpu_eq_den=denominator,
        )  # fmt: skip

    for _ in range(10):
        hold(1, 10)
    active = Tenant.objects.filter(state=TenantState.ACTIVE).values("pk")
    added = 0.0
    for _ in range(10):
        added += 1 / 10
    assert added < 1  # what PostgreSQL's float sum of them makes of it (Python's sum() is exact)
    assert quota_lines_over(active) == []

    hold(1, 10**17)
    over = quota_lines_over(active)
    assert [(tenant_id, line.used) for tenant_id, line in over] == [
        (a100_tenant.pk, 1 + Fraction(1, 10**17))
    ]
