"""The demo's synthetic metrics source: deterministic, shaped as Prometheus would answer, and
collected into usage by the real collection code."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.allocations.models import GpuRequest, Purpose
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import GpuPool, Offering, SharingBackend
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create
from portal.metering.collection import _resource_labels, hour_floor, metering_begin, window_collect
from portal.metering.models import UsageCapacity, UsageRecord
from portal.metering.synthetic import PLATFORM_NAMESPACE, SyntheticSource, utilisation
from portal.workloads.models import Notebook
from portal.workloads.services import notebook_launch

MIG = "a100-80gb-mig-1g-10gb"
WHOLE = "a100-80gb-whole"


@pytest.fixture
def demo_like(a100_tenant, developer, lead, admin_user, catalog):
    """A cluster with A100 pools (MIG and whole), the developer's notebook on a MIG slice and
    the lead's batch allocation of a whole GPU, both approved now."""
    cluster = cluster_create(actor=None, name="gpu-1")
    assert cluster.metrics_interval_seconds == 30
    model = catalog[MIG].gpu_model
    for name, backend in (("a100-mig", "mig"), ("a100-whole", "whole")):
        gpu_pool_create(
            actor=None,
            cluster="gpu-1",
            name=name,
            gpu_model=model,
            backend=SharingBackend.objects.get(slug=backend),
            node_count=1,
            gpus_per_node=8,
        )
    slice_ = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1)
    notebook = notebook_launch(actor=developer, allocation_id=slice_.pk, image="minimal-python")
    batch = gpu_request_submit(
        actor=lead, tenant=a100_tenant, offering=catalog[WHOLE], count=1, purpose=Purpose.BATCH
    )
    assert GpuPool.objects.filter(cluster="gpu-1").count() == 2
    # Both began ten minutes into an hour some hours ago (not "now", which may be an hour's
    # last seconds and leave no whole scrape interval in it).
    began = hour_floor(datetime.now(UTC)) - timedelta(hours=5) + timedelta(minutes=10)
    GpuRequest.objects.filter(pk__in=[slice_.pk, batch.pk]).update(
        starts_at=began, ends_at=began + timedelta(hours=8)
    )
    Notebook.objects.filter(pk=notebook.pk).update(created_at=began)
    slice_.refresh_from_db()
    batch.refresh_from_db()
    return cluster, notebook, slice_, batch


def test_the_same_window_gives_the_same_metrics(demo_like) -> None:
    cluster, *_ = demo_like
    start = hour_floor(datetime.now(UTC))
    resources = _resource_labels(cluster)

    first = SyntheticSource(cluster).window(start, resources=resources)
    again = SyntheticSource(cluster).window(start, resources=resources)

    assert first == again
    assert first.queries == 0


def test_pods_ask_for_their_offering_and_run_the_overlap_in_whole_intervals(demo_like) -> None:
    cluster, notebook, slice_, batch = demo_like
    start = hour_floor(slice_.starts_at)

    metrics = SyntheticSource(cluster).window(start, resources=_resource_labels(cluster))

    pod = f"nb-{notebook.pk}-0"
    requests: dict[tuple[str, str], dict[str, Decimal]] = {}
    for r in metrics.requests:
        requests.setdefault((r.namespace, r.pod), {})[r.resource] = r.amount
    # The notebook asks for its slice, and the CPU and memory it was launched with.
    assert requests[("t-vision", pod)] == {
        "nvidia_com_mig_1g_10gb": Decimal(1),
        "cpu": notebook.cpu_cores,
        "memory": Decimal(notebook.memory_gib * 2**30),
    }
    batch_pods = [
        p for (ns, p) in requests if ns == "t-vision" and p.startswith(f"batch-{batch.pk}-")
    ]
    assert len(batch_pods) == 1
    assert requests[("t-vision", batch_pods[0])] == {
        "nvidia_com_gpu": Decimal(1), "cpu": Decimal(8), "memory": Decimal(64 * 2**30),
    }  # fmt: skip
    running = {(r.namespace, r.pod): r.seconds for r in metrics.running}
    overlap = int((start + timedelta(hours=1) - slice_.starts_at).total_seconds())
    assert running[("t-vision", pod)] == overlap // 30 * 30
    device = next(d for d in metrics.devices if d.pod == pod)
    assert device.mig_profile == "1g.10gb"
    assert device.model_name == "NVIDIA A100-SXM4-80GB"
    assert 0 <= device.busy_seconds <= running[("t-vision", pod)]
    assert any(d.namespace == PLATFORM_NAMESPACE and d.busy_seconds > 0 for d in metrics.devices)


def test_a_window_before_any_allocation_has_only_the_platform(demo_like) -> None:
    cluster, _, slice_, _ = demo_like
    before = hour_floor(slice_.starts_at) - timedelta(hours=3)

    metrics = SyntheticSource(cluster).window(before, resources=_resource_labels(cluster))

    assert {d.namespace for d in metrics.devices} == {PLATFORM_NAMESPACE}


def test_working_hours_are_busier() -> None:
    pods = [f"nb-{index}-0" for index in range(50)]
    tuesday = datetime(2025, 3, 4, tzinfo=UTC)
    day = [utilisation(pod, tuesday.replace(hour=11)) for pod in pods]
    night = [utilisation(pod, tuesday.replace(hour=2)) for pod in pods]
    sunday = [utilisation(pod, datetime(2025, 3, 9, 11, tzinfo=UTC)) for pod in pods]

    assert all(busy >= quiet for busy, quiet in zip(day, night, strict=True))
    assert sum(day) > 2 * sum(night)
    assert sum(day) > 2 * sum(sunday)
    assert min(day) < 0.1 < max(day)  # some allocations sit idle


def test_collection_attributes_the_synthetic_window(demo_like) -> None:
    cluster, notebook, slice_, _ = demo_like
    start = hour_floor(slice_.starts_at)
    metering_begin(cluster=cluster, at=start, demo=True)

    window_collect(cluster, start, SyntheticSource(cluster))

    mine = UsageRecord.objects.get(cluster=cluster, hour=start, notebook=notebook)
    assert mine.offering == Offering.objects.get(slug=MIG)
    assert mine.requested > 0
    assert mine.used_gpu_hours > 0
    assert UsageRecord.objects.filter(
        cluster=cluster, hour=start, tenant=None, namespace=PLATFORM_NAMESPACE
    ).exists()


def test_the_cluster_has_its_pools_gpus_all_hour(demo_like) -> None:
    cluster, _, slice_, _ = demo_like
    start = hour_floor(slice_.starts_at)
    metering_begin(cluster=cluster, at=start, demo=True)

    window_collect(cluster, start, SyntheticSource(cluster))

    # Two pools of one node with 8 A100s each, MIG-partitioned or not: 16 GPU-hours.
    assert [
        (row.model_name, row.gpu_model, row.gpu_hours)
        for row in UsageCapacity.objects.filter(cluster=cluster, hour=start)
    ] == [("NVIDIA A100-SXM4-80GB", Offering.objects.get(slug=MIG).gpu_model, Fraction(16))]
