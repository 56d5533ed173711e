"""Capacity: the GPU-hours of each model a cluster had per hour, collected from a real
Prometheus holding the DCGM exporter's per-GPU series (promtool-backfilled history).

The story, from T0 (an hour boundary, days ago), interval 30 s:
- GPU-1 (A100) from T0-0:30 to T0+1:00: pod `seq-a`, then no pod, then `seq-b` (a series each);
- GPU-2 (A100) time-sliced between `ts-a` and `ts-b` all hour (two series, one GPU);
- GPU-3 (A100) MIG-partitioned: instances 1 and 2 all hour (two series, one GPU);
- GPU-4 (A100) on a node that left at T0+0:15;
- GPU-5 (H100) from T0+0:30 to T0+2:00;
- GPU-7 (A100) from T0+1:00 on (the next window only);
- GPU-8, a model the catalog does not know, all of T0's hour.
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from portal.catalog.models import GpuModel, Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import UsageCapacity
from portal.metering.services import metrics_source_for
from tests.metering.history import History, HistoryPrometheus

H = timedelta(hours=1)
M = timedelta(minutes=1)
T0 = hour_floor(datetime.now(UTC)) - timedelta(days=2)
A100, H100, OTHER = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA Quadro X9000"


def story() -> History:
    history = History(interval=30)

    def gpu(
        uuid: str,
        start: datetime,
        end: datetime,
        *,
        pod: str = "",
        model: str = A100,
        mig_instance: str = "",
        mig_profile: str = "",
    ) -> None:
        history.gpu(
            namespace="t-vision" if pod else "", pod=pod, uuid=uuid, start=start, end=end,
            util_percent=10, model_name=model, mig_instance=mig_instance, mig_profile=mig_profile,
        )  # fmt: skip

    gpu("GPU-1", T0 - 30 * M, T0 + 20 * M, pod="seq-a")
    gpu("GPU-1", T0 + 20 * M, T0 + 40 * M)
    gpu("GPU-1", T0 + 40 * M, T0 + H, pod="seq-b")
    gpu("GPU-2", T0, T0 + H, pod="ts-a")
    gpu("GPU-2", T0, T0 + H, pod="ts-b")
    for instance in ("1", "2"):
        gpu("GPU-3", T0, T0 + H, pod=f"mig-{instance}", mig_instance=instance,
            mig_profile="3g.40gb")  # fmt: skip
    gpu("GPU-4", T0, T0 + 15 * M)
    gpu("GPU-5", T0 + 30 * M, T0 + 2 * H, model=H100)
    gpu("GPU-7", T0 + H, T0 + 3 * H)
    gpu("GPU-8", T0, T0 + H, model=OTHER)
    return history


def capacity(cluster: Cluster, hour: datetime) -> dict[str, tuple[str | None, Fraction]]:
    return {
        row.model_name: (row.gpu_model.slug if row.gpu_model else None, row.gpu_hours)
        for row in UsageCapacity.objects.filter(cluster=cluster, hour=hour).select_related(
            "gpu_model"
        )
    }


@pytest.mark.django_db
def test_capacity_per_hour_is_collected_from_prometheus_and_rewritten_on_recollection(
    catalog: dict[str, Offering], history_prometheus: Callable[[History], HistoryPrometheus]
) -> None:
    assert GpuModel.objects.filter(slug__in=["a100-80gb", "h100-80gb"]).count() == 2
    prometheus = history_prometheus(story())
    cluster = cluster_create(
        actor=None, name="cap-east", prometheus_url=prometheus.url, metrics_interval_seconds=30
    )
    metering_begin(cluster=cluster, at=T0)
    source = metrics_source_for(cluster)
    assert source is not None

    window = window_collect(cluster, T0, source)
    window_collect(cluster, T0 + H, source)

    assert window.queries == 7  # one more query per window, whatever the number of GPUs
    # Whole GPUs, each for the part of the hour it reported: pods taking turns, time-slicing
    # and MIG instances do not multiply a GPU; one leaving after 15 minutes adds 1/4.
    assert capacity(cluster, T0) == {
        A100: ("a100-80gb", Fraction(13, 4)),
        H100: ("h100-80gb", Fraction(1, 2)),
        OTHER: (None, Fraction(1)),
    }
    assert capacity(cluster, T0 + H) == {
        A100: ("a100-80gb", Fraction(1)),
        H100: ("h100-80gb", Fraction(1)),
    }

    # Collected again, the same rows; collected again from different metrics, new rows.
    window_collect(cluster, T0, source)
    assert UsageCapacity.objects.filter(cluster=cluster, hour=T0).count() == 3
    smaller = History(interval=30)
    smaller.gpu(namespace="", pod="", uuid="GPU-1", start=T0, end=T0 + 30 * M)
    elsewhere = history_prometheus(smaller)
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=elsewhere.url)
    cluster.refresh_from_db()
    other_source = metrics_source_for(cluster)
    assert other_source is not None
    window_collect(cluster, T0, other_source)

    assert capacity(cluster, T0) == {A100: ("a100-80gb", Fraction(1, 2))}
    assert capacity(cluster, T0 + H) == {
        A100: ("a100-80gb", Fraction(1)),
        H100: ("h100-80gb", Fraction(1)),
    }
