"""RowsListSerializer (portal/core/rows.py) writes what DRF's ListSerializer writes, key for key:
the portal's own list serializers on real rows, and a serializer made of every kind of field
the fast path hands back to DRF."""

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from portal.allocations import services
from portal.allocations.models import GpuRequest, GpuRequestExtension
from portal.allocations.serializers import GpuRequestExtensionSerializer, GpuRequestSerializer
from portal.core import rows
from portal.core.audit_api import AuditEventSerializer
from portal.core.models import AuditEvent
from portal.core.rows import RowsListSerializer, row_writer
from tenants.models import Tenant
from tenants.selectors import quota_lines_for, with_quota_lines
from tenants.serializers import QuotaLineSerializer, TenantSerializer
from tenants.services import quota_set


def listed(serializer_class: type[serializers.Serializer[Any]], rows: Any, **kwargs: Any) -> Any:
    """The list serializer the portal makes of `serializer_class` (`many=True`)."""
    return serializer_class(rows, many=True, **kwargs)


def drf_rows(serializer_class: type[serializers.Serializer[Any]], rows: Any) -> Any:
    """What DRF's own ListSerializer writes for `rows`."""
    return serializers.ListSerializer(child=serializer_class(), instance=rows).data


@pytest.fixture
def requests_(developer, lead, a100_tenant, catalog) -> list[GpuRequest]:
    """An approved request (decided by nobody: auto-approved), a pending one, a rejected one
    (decided by the lead) and one extended (an extension waiting for the lead)."""
    offering = catalog["a100-80gb-whole"]

    def submit(count: int) -> GpuRequest:
        return services.gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=offering, count=count, justification="x"
        )

    approved, pending, rejected = submit(1), submit(2), submit(3)
    services.gpu_request_reject(actor=lead, gpu_request=rejected, comment="no\ttabs")
    services.gpu_request_extend(
        actor=developer, gpu_request=approved, hours=100, reason="a long run"
    )
    assert approved.state == "approved"
    assert pending.state == "pending"
    return list(GpuRequest.objects.select_related("tenant", "requester", "decided_by").all())


@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai", "America/St_Johns"])
def test_the_portals_list_serializers_write_what_drf_writes(requests_, zone) -> None:
    with timezone.override(zone):
        ours = listed(GpuRequestSerializer, requests_)
        assert isinstance(ours, RowsListSerializer)
        assert ours.data == drf_rows(GpuRequestSerializer, requests_)
        assert {row["decided_by"] for row in ours.data} == {None, "lead"}

        extensions = list(GpuRequestExtension.objects.all())
        assert extensions
        assert listed(GpuRequestExtensionSerializer, extensions).data == drf_rows(
            GpuRequestExtensionSerializer, extensions
        )

        events = list(AuditEvent.objects.order_by("id"))
        assert any(event.tenant_id is None for event in events)
        assert listed(AuditEventSerializer, events).data == drf_rows(AuditEventSerializer, events)


def test_a_list_with_nested_rows_writes_what_drf_writes(a100_tenant, tenant_b) -> None:
    tenants = with_quota_lines(list(Tenant.objects.order_by("slug")))
    assert any(tenant.quota_lines for tenant in tenants)  # type: ignore[attr-defined]
    ours = listed(TenantSerializer, tenants).data
    theirs = serializers.ListSerializer(child=TenantSerializer(), instance=tenants).data
    assert ours == theirs
    assert any(row["quotas"] for row in ours)
    # Its quota lines read from each tenant, the tenants' plan needs no call: kept.
    assert TenantSerializer in {kind for kind, _zone in rows._kept_plans}
    assert [row["slug"] for row in ours] == ["nlp", "vision"]


def test_rows_written_one_by_one_by_a_plan_are_what_drf_writes(
    a100_tenant, admin_user, catalog
) -> None:
    """A tenant's quota lines (nested in each listed tenant) are written by `row_writer`."""
    quota_set(
        actor=admin_user, tenant=a100_tenant, gpu_model=catalog["h100-80gb-whole"].gpu_model,
        gpu_eq=Fraction(22, 7),
    )  # fmt: skip
    lines = quota_lines_for([a100_tenant.pk])[a100_tenant.pk]
    assert len(lines) == 2

    write = row_writer(QuotaLineSerializer())

    assert [write(line) for line in lines] == [
        QuotaLineSerializer().to_representation(line) for line in lines
    ]
    assert [line.gpu_model.name for line in lines] == sorted(line.gpu_model.name for line in lines)


class Everything(serializers.ModelSerializer[GpuRequest]):
    """Every kind of field the fast path reads itself or hands to DRF."""

    state_shown = serializers.CharField(source="get_state_display")  # a callable source
    tenant_slug: Any = serializers.SlugRelatedField(
        source="tenant", slug_field="slug", read_only=True
    )
    decider: Any = serializers.PrimaryKeyRelatedField(source="decided_by", read_only=True)
    decider_name = serializers.CharField(source="decided_by.username", default="nobody")
    decider_email = serializers.CharField(source="decided_by.email", allow_null=True)
    whole = serializers.SerializerMethodField()
    itself = serializers.CharField(source="*")
    at_utc = serializers.DateTimeField(source="created_at", default_timezone=UTC)
    at_text = serializers.DateTimeField(source="created_at", format="%Y-%m-%d %H:%M")
    at_raw = serializers.DateTimeField(source="created_at", format=None)
    count_text = serializers.CharField(source="count")

    class Meta:
        model = GpuRequest
        fields = (
            "id", "count", "state", "state_shown", "tenant_slug", "decider", "decider_name",
            "decider_email", "whole", "itself", "at_utc", "at_text", "at_raw", "ends_at",
            "count_text", "created_at",
        )  # fmt: skip
        list_serializer_class = RowsListSerializer

    def get_whole(self, gpu_request: GpuRequest) -> str:
        return f"{gpu_request.count} x {gpu_request.offering_id}"


def test_every_kind_of_field_is_written_as_drf_writes_it(requests_) -> None:
    with timezone.override("Asia/Shanghai"):
        ours = listed(Everything, requests_).data
        assert ours == drf_rows(Everything, requests_)
    by_state = {row["state"]: row for row in ours}
    assert by_state["approved"]["decider_name"] == "nobody"  # the field's default
    assert by_state["approved"]["decider_email"] is None  # allow_null
    assert by_state["approved"]["decider"] is None
    assert by_state["rejected"]["decider_name"] == "lead"
    assert by_state["rejected"]["state_shown"] == "rejected"  # called, not a bound method
    assert by_state["rejected"]["created_at"].endswith("+08:00")
    assert by_state["rejected"]["at_utc"].endswith("Z")


def test_rows_that_are_mappings_and_a_child_with_its_own_rows_are_left_to_drf() -> None:
    class Pair(serializers.Serializer[Any]):
        name = serializers.CharField()
        at = serializers.DateTimeField()

        class Meta:
            list_serializer_class = RowsListSerializer

    class Upper(Pair):
        def to_representation(self, instance: Any) -> Any:
            return {"name": instance["name"].upper()}

    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    rows = [{"name": "a", "at": at}, {"name": "b", "at": at}]
    assert listed(Pair, rows).data == [
        {"name": "a", "at": "2026-01-02T03:04:05Z"},
        {"name": "b", "at": "2026-01-02T03:04:05Z"},
    ]
    assert listed(Upper, rows).data == [{"name": "A"}, {"name": "B"}]


def test_a_missing_required_attribute_fails_as_in_drf() -> None:
    class Named(serializers.Serializer[Any]):
        name = serializers.CharField(source="title")

        class Meta:
            list_serializer_class = RowsListSerializer

    class Row:
        title = "kept"

    with pytest.raises(AttributeError):
        serializers.ListSerializer(child=Named(), instance=[object()]).data  # noqa: B018
    with pytest.raises(AttributeError):
        listed(Named, [Row(), object()]).data  # noqa: B018
    assert listed(Named, [Row()]).data == [{"name": "kept"}]


def test_a_plan_is_kept_for_the_process_only_where_no_call_can_change_it(requests_) -> None:
    class CallersName:
        requires_context = True  # as DRF's CurrentUserDefault: reads the call

        def __call__(self, field: Any) -> str:
            return str(field.context.get("caller", "nobody"))

    class WithCaller(serializers.Serializer[Any]):
        name = serializers.CharField(source="purpose")
        caller = serializers.CharField(default=CallersName())  # type: ignore[arg-type]

        class Meta:
            list_serializer_class = RowsListSerializer

    rows._kept_plans.clear()
    for kind in (GpuRequestSerializer, Everything, WithCaller):
        listed(kind, requests_).data  # noqa: B018  (written for its plan)

    kept = {kind for kind, _zone in rows._kept_plans}
    assert GpuRequestSerializer in kept  # DRF's fields and ours that say they need no call
    assert Everything not in kept  # a method field, related fields: planned for each list
    assert WithCaller not in kept  # a default that reads the call's user
    (plan,) = [
        steps for (kind, _), steps in rows._kept_plans.items() if kind is GpuRequestSerializer
    ]
    assert all(field.parent.parent is None for _name, field, _get, _convert in plan)  # no rows held
    # Kept per time zone, and still what DRF writes.
    with timezone.override("Asia/Shanghai"):
        assert listed(GpuRequestSerializer, requests_).data == drf_rows(
            GpuRequestSerializer, requests_
        )
    assert len({zone for kind, zone in rows._kept_plans if kind is GpuRequestSerializer}) == 2
