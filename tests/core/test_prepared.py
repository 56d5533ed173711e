"""KeyedRead: a row by a unique text key with its foreign key loaded, its SQL built once per
process on PostgreSQL, and read by the ORM where psycopg's values are not the fields' own;
KeptRows: a values_list query of ids, its SQL built once per number of ids."""

from typing import Any

from django.db import transaction
from django.db.models import Count

from portal.accounts.models import ApiToken, User
from portal.accounts.tokens import api_token_create
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Period
from portal.core.audit import audit_record
from portal.core.models import AuditEvent
from portal.core.prepared import KeptRows, KeyedRead


def test_a_token_is_read_by_its_digest_with_its_user_in_one_query(
    developer, django_assert_num_queries
) -> None:
    issued = api_token_create(actor=developer, name="ci", expires_in_days=7)
    expected = ApiToken.objects.select_related("user").get(pk=issued.token.pk)
    read = KeyedRead(ApiToken, "digest", "user")

    with django_assert_num_queries(1):
        token = read.get(expected.digest)
        assert token is not None
        user = token.user

    assert read._plans[("default", "postgresql")] is not None  # the SQL built here, once
    assert [getattr(token, f.attname) for f in ApiToken._meta.concrete_fields] == [
        getattr(expected, f.attname) for f in ApiToken._meta.concrete_fields
    ]
    assert [getattr(user, f.attname) for f in User._meta.concrete_fields] == [
        getattr(developer, f.attname) for f in User._meta.concrete_fields
    ]
    assert not token._state.adding
    assert token._state.db == "default"
    assert read.get("no such digest") is None


def test_a_null_foreign_key_is_read_as_none(developer, a100_tenant, catalog) -> None:
    pending = gpu_request_submit(
        actor=developer,
        tenant=a100_tenant,
        offering=catalog["a100-80gb-whole"],
        count=4,
        justification="a null decided_by",
    )
    assert pending.decided_by_id is None
    read = KeyedRead(GpuRequest, "justification", "decided_by")

    found = read.get("a null decided_by")

    assert read._plans[("default", "postgresql")] is not None
    assert found is not None
    assert found.pk == pending.pk
    assert found.decided_by is None


def test_where_a_value_needs_converting_or_the_key_is_not_text_the_orm_reads(
    admin_user, tenant_a, django_assert_num_queries
) -> None:
    event = AuditEvent.objects.filter(tenant=tenant_a).first()
    assert event is not None
    by_action = KeyedRead(AuditEvent, "target_name", "tenant")  # `changes` is JSON
    period = Period.objects.create(month="2026-10-01")
    by_month = KeyedRead(Period, "month", "closed_by")  # a date, not text

    with django_assert_num_queries(1):
        found = by_action.get(event.target_name)
        assert found is not None
        assert found.tenant == tenant_a
        assert found.tenant.slug == tenant_a.slug  # type: ignore[union-attr]
    assert found.changes == event.changes
    assert isinstance(found.changes, dict)
    assert by_action._plans[("default", "postgresql")] is None
    read_period = by_month.get("2026-10-01")
    assert read_period is not None
    assert read_period.pk == period.pk
    assert read_period.closed_by is None
    assert by_month._plans[("default", "postgresql")] is None
    assert by_month.get("2026-09-01") is None


def test_a_user_is_read_by_its_primary_key_with_sql_built_once(
    developer, django_assert_num_queries
) -> None:
    read = KeyedRead(User, "pk")

    with django_assert_num_queries(1):
        user = read.get(developer.pk)

    assert read._plans[("default", "postgresql")] is not None
    assert user is not None
    assert [getattr(user, f.attname) for f in User._meta.concrete_fields] == [
        getattr(developer, f.attname) for f in User._meta.concrete_fields
    ]
    assert read.get(developer.pk + 1000) is None


def _events_of(ids: list[int], actor_id: int) -> Any:
    """A query of ids, a whole number and a constant (the action's prefix), a count each."""
    return (
        AuditEvent.objects.filter(pk__in=ids, actor_id=actor_id, action__startswith="kept.")
        .order_by()
        .values("target_id")
        .annotate(events=Count("pk"))
        .values_list("target_id", "events")
    )


def test_kept_rows_are_the_orms_for_every_shape_and_value(admin_user, developer) -> None:
    """`KeptRows`: the SQL built once for each number of ids, run with each call's ids and
    whole numbers (and the query's own constants); the rows are the ORM's, aggregates
    converted as Django converts them."""
    ids = []
    for actor in (admin_user, developer, admin_user, admin_user):
        event = audit_record_now(actor, "kept.read", target=developer)
        ids.append(event.pk)
    other = audit_record_now(admin_user, "other.read", target=developer).pk
    kept = KeptRows(AuditEvent, _events_of)

    for chosen, actor in [
        (ids[:2], admin_user), (ids[1:3], developer), (ids, admin_user), (ids[2:], admin_user),
        ([*ids, other], admin_user), ([10**9], admin_user),
    ]:  # fmt: skip
        assert kept.rows(chosen, actor.pk) == list(_events_of(chosen, actor.pk))
    assert kept.rows(ids, admin_user.pk) == [(str(developer.pk), 3)]
    # Built once per number of ids, on PostgreSQL: 2, 4, 5 and 1 ids.
    assert kept._plan.cache_info().currsize == 4
    assert kept.rows([], admin_user.pk) == []  # no shape to keep: the ORM's answer


def audit_record_now(actor: User, action: str, *, target: User) -> AuditEvent:
    with transaction.atomic():
        return audit_record(actor=actor, action=action, target=target)
