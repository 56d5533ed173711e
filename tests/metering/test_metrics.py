"""Metering watermarks on /metrics: what the lagging-watermark alert reads."""

from datetime import UTC, datetime

from django.test import Client

from portal.cluster.services import cluster_create
from portal.metering.collection import metering_begin
from portal.metering.models import MeteringState
from tests.scrape import scraped

BEGINS = datetime(2026, 3, 2, 8, tzinfo=UTC)


def test_each_metered_cluster_exposes_its_watermark(client: Client, db, settings) -> None:
    settings.PROMETHEUS_URL = ""
    lab = cluster_create(actor=None, name="lab", prometheus_url="http://lab.example.org:9090")
    fresh = cluster_create(actor=None, name="fresh", prometheus_url="http://fresh.example.org:9090")
    unmetered = cluster_create(actor=None, name="blind")  # no Prometheus to read
    off = cluster_create(
        actor=None, name="off", prometheus_url="http://off.example.org:9090", enabled=False
    )
    for cluster in (lab, fresh, unmetered, off):
        metering_begin(cluster=cluster, at=BEGINS)
    MeteringState.objects.filter(cluster=lab).update(
        complete_until=datetime(2026, 3, 2, 11, tzinfo=UTC)
    )

    assert scraped(client, "portal_metering_complete_until_timestamp_seconds") == {
        (("cluster", "lab"),): datetime(2026, 3, 2, 11, tzinfo=UTC).timestamp(),
        # No window done yet: complete until the hour metering begins.
        (("cluster", "fresh"),): BEGINS.timestamp(),
    }
