"""Metering's watermarks on /metrics, read at scrape time (alerts in deploy/prometheus/rules).

One query: the metering state of every enabled cluster that is metered (a Prometheus to read,
or the demo's synthetic source). A cluster metered but with no window done yet is complete
until the hour metering begins, so a first window that never completes shows as lag too.
"""

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from portal.core.metrics import DatabaseCollector, unix_seconds
from portal.metering.models import MeteringState
from portal.metering.services import cluster_metered


class MeteringCollector(DatabaseCollector):
    def families(self) -> Iterator[Metric]:
        watermark = GaugeMetricFamily(
            "portal_metering_complete_until_timestamp_seconds",
            "The cluster's metering watermark: usage is complete until then",
            labels=["cluster"],
        )
        states = MeteringState.objects.filter(cluster__enabled=True).select_related("cluster")
        for state in states.order_by("cluster__name"):
            if not cluster_metered(state.cluster):
                continue
            until = state.complete_until or state.begins_at
            watermark.add_metric([state.cluster.name], unix_seconds(until))
        yield watermark
