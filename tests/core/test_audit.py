import pytest
from django.db import DatabaseError, connection, transaction

from portal.accounts.services import user_create
from portal.core.audit import audit_record
from portal.core.models import AuditEvent


def test_audit_rows_cannot_be_updated_through_sql(tenant_a) -> None:
    event = AuditEvent.objects.get(action="tenant.create")

    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("UPDATE core_auditevent SET action = 'forged' WHERE id = %s", [event.pk])

    event.refresh_from_db()
    assert event.action == "tenant.create"


def test_audit_rows_cannot_be_deleted_through_sql(tenant_a) -> None:
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM core_auditevent")

    assert AuditEvent.objects.filter(action="tenant.create").count() == 1


def test_audit_record_refuses_to_run_outside_a_transaction(transactional_db) -> None:
    user = user_create(actor=None, username="someone")

    with pytest.raises(RuntimeError, match="inside the service's transaction"):
        audit_record(actor=None, action="user.poke", target=user)


def test_a_failed_service_leaves_no_audit_event(tenant_a, admin_user) -> None:
    from portal.core.errors import InvalidTransition  # noqa: PLC0415
    from tenants.services import tenant_change_state  # noqa: PLC0415

    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")
    with pytest.raises(InvalidTransition):
        tenant_change_state(actor=admin_user, tenant=tenant_a, action="suspend")

    assert list(AuditEvent.objects.filter(tenant=tenant_a).values_list("action", flat=True)) == [
        "tenant.archive",
        "tenant.create",
    ]
