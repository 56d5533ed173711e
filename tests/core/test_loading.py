"""`portal.core.loading`: a model's instances made from rows without `Model.__init__` are the
instances Django makes: the same values, state and deferred fields, and `post_init` still
heard where anything listens."""

from typing import Any

import pytest
from django.db import transaction
from django.db.models import Model
from django.db.models.signals import post_init

from portal.core.audit import audit_record
from portal.core.models import AuditEvent
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def _values(instance: Model) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.fields}


def test_a_row_is_loaded_with_every_value_and_the_state_of_a_saved_row(tenant_a: Tenant) -> None:
    loaded = Tenant.objects.get(pk=tenant_a.pk)
    made_by_django = Model.from_db.__func__(  # type: ignore[attr-defined]
        Tenant, "default", [field.attname for field in Tenant._meta.concrete_fields],
        [getattr(loaded, field.attname) for field in Tenant._meta.concrete_fields],
    )  # fmt: skip
    assert type(loaded) is Tenant
    assert _values(loaded) == _values(made_by_django) == _values(tenant_a)
    assert loaded._state.adding is False
    assert loaded._state.db == "default"
    assert loaded == tenant_a
    loaded.name = "Renamed"
    loaded.save(update_fields=["name"])  # an UPDATE of a saved row, not an INSERT
    assert Tenant.objects.get(pk=tenant_a.pk).name == "Renamed"


def test_a_deferred_field_is_read_when_asked_for(
    tenant_a: Tenant, django_assert_num_queries: Any
) -> None:
    loaded = Tenant.objects.only("slug").get(pk=tenant_a.pk)
    assert loaded.get_deferred_fields() >= {"name", "cost_centre"}
    with django_assert_num_queries(1):
        assert loaded.name == tenant_a.name
    with django_assert_num_queries(0):
        assert loaded.slug == tenant_a.slug


def test_a_related_row_is_loaded_the_same_way(tenant_a: Tenant, admin_user: Any) -> None:
    with transaction.atomic():
        event = audit_record(
            actor=admin_user, action="tenant.update", target=tenant_a, tenant=tenant_a
        )
    loaded = AuditEvent.objects.select_related("tenant").get(pk=event.pk)
    assert type(loaded.tenant) is Tenant
    assert loaded.tenant._state.adding is False
    assert _values(loaded.tenant) == _values(tenant_a)


def test_a_listener_of_post_init_still_hears_of_each_row(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    heard: list[int] = []

    def listen(sender: type[Model], instance: Model, **kwargs: Any) -> None:
        heard.append(instance.pk)

    post_init.connect(listen, sender=Tenant)
    try:
        rows = list(Tenant.objects.filter(pk__in=[tenant_a.pk, tenant_b.pk]).order_by("pk"))
    finally:
        post_init.disconnect(listen, sender=Tenant)
    assert [row.pk for row in rows] == heard == sorted([tenant_a.pk, tenant_b.pk])
    assert all(row._state.adding is False for row in rows)
