"""KeyedRead: a row by a unique text key with its foreign key loaded, its SQL built once per
process on PostgreSQL, and read by the ORM where psycopg's values are not the fields' own."""

from portal.accounts.models import ApiToken, User
from portal.accounts.tokens import api_token_create
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Period
from portal.core.models import AuditEvent
from portal.core.prepared import KeyedRead


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
