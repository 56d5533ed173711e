"""One window costs a fixed number of Prometheus queries and database statements, whatever the
number of pods: aggregation happens in PromQL and the records go in one bulk insert."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import UsageRecord
from portal.metering.services import metrics_source_for
from tenants.models import Tenant
from tests.metering.history import History, HistoryPrometheus

START = hour_floor(datetime.now(UTC)) - timedelta(days=1)


def window_cost(
    pods: int, serve: Callable[[History], HistoryPrometheus], django_assert_max_num_queries
) -> tuple[int, int]:
    """(Prometheus queries, usage records) of collecting one window with `pods` busy pods."""
    history = History(interval=60)
    for index in range(pods):
        pod = f"job-{index}"
        history.pod(namespace="t-vision", pod=pod, start=START, end=START + timedelta(hours=1),
                    requests={"nvidia_com_gpu": 1})  # fmt: skip
        history.gpu(namespace="t-vision", pod=pod, uuid=f"GPU-{index}", start=START,
                    end=START + timedelta(hours=1), util_percent=40)  # fmt: skip
    prometheus = serve(history)
    cluster = cluster_create(
        actor=None, name=f"scale-{pods}", prometheus_url=prometheus.url,
        metrics_interval_seconds=60,
    )  # fmt: skip
    gpu_pool_create(
        actor=None, cluster=cluster.name, name="whole",
        gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=SharingBackend.objects.get(slug="whole"),
    )  # fmt: skip
    metering_begin(cluster=cluster, at=START)
    source = metrics_source_for(cluster)
    assert source is not None
    answered = prometheus.queries_answered()
    # The window's reads and writes, the day's three rollups and its month's two (each a
    # delete and an INSERT … SELECT): the same for 1 pod as for 200.
    with django_assert_max_num_queries(34):
        window = window_collect(cluster, START, source)
    asked = prometheus.queries_answered() - answered
    assert asked == window.queries
    assert UsageRecord.objects.filter(cluster=cluster).count() == pods
    return asked, window.records


@pytest.mark.django_db
def test_prometheus_queries_per_window_do_not_grow_with_pods(
    tenant_a: Tenant,
    catalog: dict[str, Offering],
    history_prometheus: Callable[[History], HistoryPrometheus],
    django_assert_max_num_queries,
) -> None:
    few = window_cost(10, history_prometheus, django_assert_max_num_queries)
    many = window_cost(1000, history_prometheus, django_assert_max_num_queries)

    assert few == (7, 10)
    assert many == (7, 1000)
