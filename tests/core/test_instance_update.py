"""instance_update: the one way a service applies a change of fields, saves and records it."""

from typing import Any

import pytest
from django.db import transaction

from portal.catalog.models import SharingBackend
from portal.core.errors import Conflict, ValidationFailed
from portal.core.models import AuditEvent
from portal.core.services import instance_update
from tenants.models import Tenant

ALLOWED = ("name", "cost_centre", "default_duration_hours", "max_duration_hours")


def update(tenant: Tenant, actor: Any = None, **changes: Any) -> dict[str, list[Any]]:
    with transaction.atomic():
        return instance_update(
            actor=actor,
            instance=tenant,
            changes=changes,
            allowed=ALLOWED,
            action="tenant.update",
            tenant=tenant,
        )


def test_a_change_is_saved_and_recorded_with_before_and_after(admin_user, tenant_a) -> None:
    changes = update(tenant_a, admin_user, name="Vision", cost_centre="CC-4100")

    assert changes == {"name": ["Computer Vision Lab", "Vision"]}
    assert Tenant.objects.get(pk=tenant_a.pk).name == "Vision"
    event = AuditEvent.objects.get(action="tenant.update")
    assert (event.actor, event.tenant, event.target_id) == (admin_user, tenant_a, str(tenant_a.pk))
    assert event.changes == changes


def test_only_the_columns_that_moved_are_written(tenant_a) -> None:
    stale = Tenant.objects.get(pk=tenant_a.pk)
    Tenant.objects.filter(pk=tenant_a.pk).update(cost_centre="CC-MOVED-MEANWHILE")

    update(stale, name="Vision")

    fresh = Tenant.objects.get(pk=tenant_a.pk)
    assert (fresh.name, fresh.cost_centre) == ("Vision", "CC-MOVED-MEANWHILE")
    assert fresh.updated_at > tenant_a.updated_at


def test_an_update_that_changes_nothing_writes_and_records_nothing(tenant_a) -> None:
    assert update(tenant_a, name=tenant_a.name) == {}

    assert Tenant.objects.get(pk=tenant_a.pk).updated_at == tenant_a.updated_at
    assert not AuditEvent.objects.filter(action="tenant.update").exists()


def test_a_field_that_is_not_allowed_is_refused_naming_it(tenant_a) -> None:
    with pytest.raises(ValidationFailed) as refused:
        update(tenant_a, name="Vision", slug="renamed")

    assert refused.value.fields == {"slug": ["Cannot be changed."]}
    assert Tenant.objects.get(pk=tenant_a.pk).slug == "vision"
    assert not AuditEvent.objects.filter(action="tenant.update").exists()


def test_the_callers_and_the_models_problems_are_named_at_once(tenant_a) -> None:
    with pytest.raises(ValidationFailed) as refused, transaction.atomic():
        instance_update(
            actor=None,
            instance=tenant_a,
            changes={"name": ""},
            allowed=ALLOWED,
            action="tenant.update",
            problems={"cost_centre": ["Unknown cost centre."]},
        )

    assert set(refused.value.fields) == {"name", "cost_centre"}
    assert "tenant" in refused.value.message


def test_the_rules_across_fields_run_once_the_fields_are_valid(tenant_a) -> None:
    def check(tenant: Tenant) -> None:
        if tenant.default_duration_hours > tenant.max_duration_hours:
            raise ValidationFailed.on("default_duration_hours", "Longer than the maximum.")

    with pytest.raises(ValidationFailed) as refused, transaction.atomic():
        instance_update(
            actor=None,
            instance=tenant_a,
            changes={"default_duration_hours": 200, "max_duration_hours": 100},
            allowed=ALLOWED,
            action="tenant.update",
            full_clean={"validate_constraints": False},
            check=check,
        )

    assert refused.value.fields == {"default_duration_hours": ["Longer than the maximum."]}
    assert Tenant.objects.get(pk=tenant_a.pk).max_duration_hours == 168


def test_a_new_instance_is_created_and_recorded_from_nothing(admin_user) -> None:
    backend = SharingBackend()

    with transaction.atomic():
        changes = instance_update(
            actor=admin_user,
            instance=backend,
            changes={"slug": "mps", "name": "NVIDIA MPS", "description": ""},
            allowed=("slug", "name", "description"),
            action="backend.create",
        )

    assert backend.pk is not None
    assert changes == {
        "slug": [None, "mps"],
        "name": [None, "NVIDIA MPS"],
        "description": [None, ""],
    }
    assert AuditEvent.objects.get(action="backend.create").changes == changes


def test_a_duplicate_the_validation_let_through_is_a_conflict(admin_user) -> None:
    fields = {"slug": "mps", "name": "NVIDIA MPS"}
    SharingBackend.objects.create(**fields)

    with pytest.raises(Conflict), transaction.atomic():
        instance_update(
            actor=admin_user,
            instance=SharingBackend(),
            changes=fields,
            allowed=fields,
            action="backend.create",
            full_clean={"validate_unique": False},
        )

    assert SharingBackend.objects.count() == 1
    assert not AuditEvent.objects.filter(action="backend.create").exists()
