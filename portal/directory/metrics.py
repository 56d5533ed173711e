"""The Keycloak directory sync on /metrics, read at scrape time, only while the sync is on
(alerts in deploy/prometheus/rules). Pending and failed changes are few by nature (the
`state, id` index); the reconcile reports are read newest first by id, stopping at the first
that succeeded."""

from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min
from prometheus_client.core import GaugeMetricFamily, Metric

from portal.core.metrics import DatabaseCollector, unix_seconds
from portal.directory.models import ChangeState, DirectoryChange, DirectoryReport


class DirectoryCollector(DatabaseCollector):
    def families(self) -> Iterator[Metric]:
        if not settings.KEYCLOAK_SYNC:
            return
        waiting = {
            state: (changes, first)
            for state, changes, first in DirectoryChange.objects.filter(
                state__in=(ChangeState.PENDING, ChangeState.FAILED)
            )
            .order_by()
            .values_list("state")
            .annotate(changes=Count("pk"), first=Min("created_at"))
        }
        changes = GaugeMetricFamily(
            "portal_directory_changes",
            "Changes for Keycloak waiting to be sent (pending) or refused by it (failed)",
            labels=["state"],
        )
        for state in (ChangeState.PENDING, ChangeState.FAILED):
            changes.add_metric([state], waiting.get(state, (0, None))[0])
        yield changes
        if ChangeState.PENDING in waiting:
            yield GaugeMetricFamily(
                "portal_directory_oldest_pending_change_timestamp_seconds",
                "When the oldest change still waiting to be sent to Keycloak was queued",
                value=unix_seconds(waiting[ChangeState.PENDING][1]),
            )
        yield GaugeMetricFamily(
            "portal_directory_reconcile_interval_seconds",
            "How often the sync reconciles Keycloak's groups (KEYCLOAK_SYNC_SECONDS)",
            value=settings.KEYCLOAK_SYNC_SECONDS,
        )
        succeeded = DirectoryReport.objects.filter(ok=True).order_by("-pk").first()
        if succeeded is not None:
            yield GaugeMetricFamily(
                "portal_directory_reconcile_last_success_timestamp_seconds",
                "When the last reconcile with Keycloak that succeeded finished",
                value=unix_seconds(succeeded.finished_at),
            )
