"""Provisioning runs on /metrics, read at scrape time (alerts in deploy/prometheus/rules).

Three queries whatever the number of runs kept: unfinished runs are few by nature (the
`state, created_at` index), and a failed run counts only while no later run of the same
namespace (or notebook) exists, so fixed failures stop counting without deleting history.
"""

from collections.abc import Iterator

from django.db.models import Count, Exists, Min, OuterRef, Q
from prometheus_client.core import GaugeMetricFamily, Metric

from portal.cluster.models import UNFINISHED_RUN_STATES, Cluster, ProvisioningRun, RunState
from portal.core.metrics import DatabaseCollector, unix_seconds


def _failed_runs_standing() -> dict[str, int]:
    """Per cluster name: failed runs not followed by a later run of the same target (the
    tenant's namespace, or the notebook) that may have fixed it."""
    later = ProvisioningRun.objects.filter(
        cluster=OuterRef("cluster"), tenant=OuterRef("tenant"), pk__gt=OuterRef("pk")
    )
    rows = (
        ProvisioningRun.objects.filter(state=RunState.FAILED)
        .alias(
            superseded=Exists(later.filter(notebook__isnull=True)),
            redone=Exists(later.filter(notebook=OuterRef("notebook"))),
        )
        .filter(
            Q(notebook__isnull=True, superseded=False) | Q(notebook__isnull=False, redone=False)
        )
        .order_by()
        .values_list("cluster__name")
        .annotate(runs=Count("pk"))
    )
    return dict(rows)


class ProvisioningCollector(DatabaseCollector):
    def families(self) -> Iterator[Metric]:
        clusters = list(Cluster.objects.order_by("name").values_list("name", flat=True))
        counts: dict[tuple[str, str], int] = {}
        oldest_at: dict[str, float] = {}
        for name, state, runs, first in (
            ProvisioningRun.objects.filter(state__in=UNFINISHED_RUN_STATES)
            .order_by()
            .values_list("cluster__name", "state")
            .annotate(runs=Count("pk"), first=Min("created_at"))
        ):
            counts[name, state] = runs
            oldest_at[name] = min(oldest_at.get(name, unix_seconds(first)), unix_seconds(first))
        unfinished = GaugeMetricFamily(
            "portal_provisioning_runs_unfinished",
            "Provisioning runs queued or running",
            labels=["cluster", "state"],
        )
        for name in clusters:
            for state in UNFINISHED_RUN_STATES:
                unfinished.add_metric([name, state], counts.get((name, state), 0))
        yield unfinished
        oldest = GaugeMetricFamily(
            "portal_provisioning_oldest_unfinished_run_timestamp_seconds",
            "When the oldest provisioning run still queued or running was queued",
            labels=["cluster"],
        )
        for name, at in sorted(oldest_at.items()):
            oldest.add_metric([name], at)
        yield oldest
        standing = _failed_runs_standing()
        failed = GaugeMetricFamily(
            "portal_provisioning_failed_runs",
            "Failed provisioning runs not followed by a later run of the same namespace or "
            "notebook",
            labels=["cluster"],
        )
        for name in clusters:
            failed.add_metric([name], standing.get(name, 0))
        yield failed
