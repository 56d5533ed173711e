"""Metering's entry points: collect every cluster's due windows from its metrics source."""

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from portal.cluster.models import Cluster
from portal.metering.collection import MeterResult, meter_cluster
from portal.metering.models import MeteringState
from portal.metering.prometheus import PrometheusGateway
from portal.metering.sources import MetricsSource, PrometheusSource
from portal.metering.synthetic import SyntheticSource

logger = logging.getLogger(__name__)


def cluster_metered(cluster: Cluster) -> bool:
    """Whether metering has a source for the cluster: a Prometheus, or the demo's."""
    return bool(settings.PORTAL_SYNTHETIC_METRICS or cluster.metrics_url)


def metrics_source_for(cluster: Cluster) -> MetricsSource | None:
    """The cluster's Prometheus (its own URL, else PROMETHEUS_URL), the demo's synthetic
    source when PORTAL_SYNTHETIC_METRICS is on, or None: the cluster is not metered."""
    if not cluster_metered(cluster):
        return None
    if settings.PORTAL_SYNTHETIC_METRICS:
        return SyntheticSource(cluster)
    gateway = PrometheusGateway(
        base_url=cluster.metrics_url, timeout_seconds=settings.PROMETHEUS_TIMEOUT_SECONDS
    )
    return PrometheusSource(gateway, interval_seconds=cluster.metrics_interval_seconds)


def usage_collect(
    *, cluster_id: int | None = None, now: datetime | None = None
) -> dict[str, MeterResult]:
    """Collect the due windows of every enabled cluster (or one), oldest first."""
    clusters = Cluster.objects.filter(enabled=True).order_by("id")
    if cluster_id is not None:
        clusters = clusters.filter(pk=cluster_id)
    results = {}
    for cluster in clusters:
        source = metrics_source_for(cluster)
        if source is None:
            continue
        try:
            results[cluster.name] = meter_cluster(
                cluster, source, now=now, limit=settings.PORTAL_METERING_CATCH_UP
            )
        except Exception as error:  # one cluster's fault must not stop the others' metering
            logger.exception("metering %s failed", cluster.name)
            MeteringState.objects.filter(cluster=cluster).update(
                last_run_at=timezone.now(), last_error=f"{type(error).__name__}: {error}"[:2000]
            )
            results[cluster.name] = MeterResult(error=str(error))
    return results
