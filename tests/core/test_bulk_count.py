"""`counted_sql` and `count_of` (portal/core/bulk.py): the rows of several querysets counted in
one query, a row of two counted twice, a filter no row can match adding nothing."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.core.audit import audit_record
from portal.core.bulk import count_of, counted_sql
from portal.core.models import AuditEvent


def test_querysets_are_counted_together_in_one_query(admin_user) -> None:
    for number in range(5):
        audit_record(actor=admin_user, action="test.count", target=admin_user, comment=str(number))
    events = AuditEvent.objects.filter(action="test.count")
    first_two = events.filter(comment__in=["0", "1"])

    with CaptureQueriesContext(connection) as queries:
        plan = counted_sql([events, first_two, events.filter(pk__in=[])])
        assert plan is not None
        counted = count_of("default", *plan)

    assert counted == 7  # 5 + 2: the two rows of both are counted twice
    assert len(queries.captured_queries) == 1
    assert counted_sql([events.filter(pk__in=[])]) is None
