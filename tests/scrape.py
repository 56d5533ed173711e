"""Reading the portal's /metrics in tests, as Prometheus would."""

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


def scraped(client: Client, name: str) -> dict[Labels, float]:
    """The samples of metric family `name` on /metrics (from loopback), by their labels."""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        if family.name == name
        for sample in family.samples
    }
