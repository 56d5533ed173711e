"""CPU core-hours and memory (RAM) GiB-hours, collected from a real Prometheus holding known
kube-state-metrics history (promtool-backfilled blocks), in the same query as the GPU requests.

The hour T0+1 on cluster gpu-east (namespace prefix t-):
- `train` in t-vision holds a whole GPU; its container `main` requests 3 cores and 12 GiB, its
  container `sidecar` 1 core and 4 GiB (and no GPU), all hour;
- `half` in t-vision holds a GPU and requests 2.5 cores and 8 GiB, from T0+1:00 to T0+1:30;
- `web` in t-vision requests 8 cores and 32 GiB and no GPU: not metered;
- `probe` in kube-system (not a tenant's) holds a GPU with 1 core and 1 GiB: unattributed;
- an allocation of the developer's with no pod, the whole hour: reserved only.
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.allocations.models import GpuRequest
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import UsageDaily, UsageRecord, UsageWindow, WorkloadKind
from portal.metering.services import metrics_source_for
from tests.metering.history import History, HistoryPrometheus
from tests.workloads.conftest import allocation_of

T0 = hour_floor(datetime.now(UTC)) - timedelta(days=3)
H = timedelta(hours=1)
GIB = 2**30
REQUESTS = "kube_pod_container_resource_requests"


def container(
    history: History, namespace: str, pod: str, name: str, start: datetime, end: datetime,
    **requests: float,
) -> None:  # fmt: skip
    """kube-state-metrics' request series of one container (cpu in cores, memory in bytes)."""
    units = {"cpu": "core", "memory": "byte"}
    for resource, amount in requests.items():
        labels = {
            "namespace": namespace, "pod": pod, "container": name, "resource": resource,
            "unit": units.get(resource, "integer"), "node": "gpu-node-1",
        }  # fmt: skip
        history.series(REQUESTS, labels, start, end, amount)


def running(history: History, namespace: str, pod: str, start: datetime, end: datetime) -> None:
    labels = {"namespace": namespace, "pod": pod, "phase": "Running"}
    history.series("kube_pod_status_phase", labels, start, end, 1)


@pytest.fixture
def cluster(
    a100_tenant, developer, catalog, history_prometheus: Callable[[History], HistoryPrometheus]
) -> Cluster:
    history = History(interval=30)
    start, end = T0 + H, T0 + 2 * H
    running(history, "t-vision", "train", start, end)
    container(history, "t-vision", "train", "main", start, end,
              nvidia_com_gpu=1, cpu=3, memory=12 * GIB)  # fmt: skip
    container(history, "t-vision", "train", "sidecar", start, end, cpu=1, memory=4 * GIB)
    half = start + 30 * timedelta(minutes=1)
    running(history, "t-vision", "half", start, half)
    container(history, "t-vision", "half", "main", start, half,
              nvidia_com_gpu=1, cpu=2.5, memory=8 * GIB)  # fmt: skip
    running(history, "t-vision", "web", start, end)
    container(history, "t-vision", "web", "main", start, end, cpu=8, memory=32 * GIB)
    running(history, "kube-system", "probe", start, end)
    container(history, "kube-system", "probe", "main", start, end,
              nvidia_com_gpu=1, cpu=1, memory=GIB)  # fmt: skip
    prometheus = history_prometheus(history)
    reservation = allocation_of(developer, a100_tenant, catalog["a100-80gb-whole"])
    GpuRequest.objects.filter(pk=reservation.pk).update(starts_at=start, ends_at=end)
    cluster = cluster_create(
        actor=None, name="gpu-east", prometheus_url=prometheus.url, metrics_interval_seconds=30
    )
    metering_begin(cluster=cluster, at=T0)
    return cluster


def collect(cluster: Cluster) -> UsageWindow:
    source = metrics_source_for(cluster)
    assert source is not None
    return window_collect(cluster, T0 + H, source)


def test_cpu_and_memory_requests_are_collected_exactly_per_pod(cluster: Cluster) -> None:
    window = collect(cluster)

    rows = {
        (row.namespace, row.workload_kind, row.workload): (row.cpu_core_hours, row.ram_gib_hours)
        for row in UsageRecord.objects.filter(hour=T0 + H)
    }
    allocation = GpuRequest.objects.get()
    assert rows == {
        # Summed over the pod's containers, the sidecar's too.
        ("t-vision", WorkloadKind.POD, "train"): (Decimal(4), Decimal(16)),
        # Half the hour running: half the hour's requests.
        ("t-vision", WorkloadKind.POD, "half"): (Decimal("1.25"), Decimal(4)),
        # A pod not in a tenant's namespace keeps its numbers, unattributed.
        ("kube-system", WorkloadKind.UNATTRIBUTED, ""): (Decimal(1), Decimal(1)),
        # Reserved with no pod: no CPU, no memory.
        ("t-vision", WorkloadKind.ALLOCATION, f"allocation-{allocation.pk}"): (
            Decimal(0), Decimal(0),
        ),
    }  # fmt: skip
    # `web` asks for no GPU: it is not metered at all.
    assert not UsageRecord.objects.filter(workload="web").exists()
    # The GPU requests are read as before, in the same query.
    train = UsageRecord.objects.get(workload="train")
    assert train.requested == Fraction(1)
    assert window.queries == 7


def test_prometheus_is_not_asked_for_the_cpu_and_memory_of_pods_without_a_gpu(
    cluster: Cluster,
) -> None:
    source = metrics_source_for(cluster)
    assert source is not None

    metrics = source.window(T0 + H, resources=["nvidia_com_gpu"])

    asked = {(r.pod, r.resource): r.amount for r in metrics.requests}
    assert asked == {
        ("train", "nvidia_com_gpu"): 1, ("train", "cpu"): 4, ("train", "memory"): 16 * GIB,
        ("half", "nvidia_com_gpu"): 1, ("half", "cpu"): Decimal("2.5"),
        ("half", "memory"): 8 * GIB,
        ("probe", "nvidia_com_gpu"): 1, ("probe", "cpu"): 1, ("probe", "memory"): GIB,
    }  # fmt: skip
    assert metrics.queries == 7


def test_the_daily_rollup_sums_cpu_and_memory(cluster: Cluster) -> None:
    collect(cluster)

    vision = UsageDaily.objects.get(namespace="t-vision", day=(T0 + H).date(), offering=None)

    assert (vision.cpu_core_hours, vision.ram_gib_hours) == (Decimal("5.25"), Decimal(20))


def test_the_usage_api_gives_cpu_and_memory_per_workload(
    cluster: Cluster, client_for, admin_user
) -> None:
    collect(cluster)
    day = (T0 + H).date().isoformat()

    answer = client_for(admin_user).get(
        "/api/v1/usage/", {"group_by": "workload", "from": day, "to": day, "page_size": 100}
    )

    assert answer.status_code == 200, answer.content
    rows = {row["workload"]: row for row in answer.json()["results"]}
    assert (rows["train"]["cpu_core_hours"], rows["train"]["ram_gib_hours"]) == (
        "4.000000", "16.000000",
    )  # fmt: skip
    assert (rows["half"]["cpu_core_hours"], rows["half"]["ram_gib_hours"]) == (
        "1.250000", "4.000000",
    )  # fmt: skip
