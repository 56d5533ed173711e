"""The demo's synthetic metrics source: what a cluster's Prometheus would say about the pods the
portal's own records put there, made up deterministically (PORTAL_SYNTHETIC_METRICS).

For one window it looks at the cluster's notebooks whose allocation overlapped the window, and
at batch allocations (purpose `batch`, no notebook) of offerings one of the cluster's pools
serves, and answers as kube-state-metrics and the DCGM exporter would:

- each pod asks for its offering's extended resources x the allocation's count, and runs for
  the part of the window its allocation held, in whole scrape intervals; a notebook's pod asks
  for the CPU cores and memory the notebook was launched with (as its StatefulSet does), a
  batch pod for BATCH_CPU_CORES and BATCH_MEMORY_GIB per allocated unit;
- each pod's GPUs (or MIG instance) are busy by a function of a hash of the pod's name and the
  hour of the day: busier on weekday working hours (UTC), and one pod in five barely used (the
  idle allocations a lead wants to see); a time-sliced or memory-sliced share is busy in
  proportion to its share; memory in use follows utilisation;
- a platform namespace the portal does not manage (`ml-platform`) keeps one GPU busy, so the
  pages have unattributed usage, and now and then a GPU reports an XID error;
- the cluster's GPUs are its pools' nodes x GPUs per node, present the whole hour (capacity).

The same window always gives the same numbers (sha256, not Python's salted `hash`), and it asks
no Prometheus: `queries` is 0.
"""

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from fractions import Fraction

from django.db.models import Q

from portal.allocations.models import GpuRequest, Purpose
from portal.catalog.models import GpuModel, GpuPool, Offering
from portal.cluster.models import Cluster
from portal.metering.sources import (
    CPU,
    MEMORY,
    WINDOW,
    DeviceUse,
    GpuCapacity,
    PodRequest,
    PodRunning,
    WindowMetrics,
    XidReport,
    resource_label,
)
from portal.workloads.models import Notebook

PLATFORM_NAMESPACE = "ml-platform"
PLATFORM_POD = "inference-gateway-0"
MIG_RESOURCE = re.compile(r"/mig-(\d+g\.(\d+)gb)$")
WORKING_HOURS = range(8, 19)
XID_ONE_IN = 60  # windows; an XID 79 ("fallen off the bus") or 48 (double-bit ECC) then
GIB = 2**30
# What a batch pod requests besides its GPUs, per unit of its offering it holds.
BATCH_CPU_CORES, BATCH_MEMORY_GIB = Decimal(8), 64
# The platform team's gateway: CPU cores and memory (GiB).
PLATFORM_CPU_CORES, PLATFORM_MEMORY_GIB = Decimal(4), 32


def _unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on `parts`."""
    digest = hashlib.sha256("/".join(str(part) for part in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def utilisation(pod: str, hour: datetime) -> Decimal:
    """How busy `pod`'s GPUs are during `hour`, as a fraction of 1, to the hundredth."""
    base = 0.02 + 0.06 * _unit(pod, "idle") if _unit(pod) < 0.2 else 0.25 + 0.6 * _unit(pod)
    working = hour.weekday() < 5 and hour.hour in WORKING_HOURS
    level = base if working else base * 0.3
    noise = 0.9 + 0.2 * _unit(pod, hour.isoformat())
    return Decimal(str(round(min(level * noise, 1.0), 2)))


def _device_name(model: GpuModel) -> str:
    """The DCGM exporter's `modelName` (e.g. "NVIDIA A100-SXM4-80GB") from the node label."""
    vendor, _, rest = model.node_label_value.partition("-")
    return f"{vendor} {rest}" if rest else vendor


def _quantity(value: object) -> Decimal | None:
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        return None
    return amount if amount.is_finite() and amount > 0 else None


class SyntheticSource:
    """A MetricsSource for the demo: the portal's own notebooks and batch allocations as pods."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.interval = max(cluster.metrics_interval_seconds, 1)

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        end = start + WINDOW
        wanted = set(resources)
        metrics = WindowMetrics(queries=0)
        for namespace, pod, allocation, compute in self._pods(start, end):
            begin = max(allocation.starts_at or start, start)
            finish = min(allocation.ends_at or end, end)
            seconds = int((finish - begin).total_seconds()) // self.interval * self.interval
            if seconds <= 0:
                continue
            self._pod(
                metrics,
                namespace=namespace,
                pod=pod,
                allocation=allocation,
                start=start,
                seconds=seconds,
                wanted=wanted,
                compute=compute,
            )
        self._platform(metrics, start, wanted)
        metrics.capacity = self._capacity()
        return metrics

    def _capacity(self) -> list[GpuCapacity]:
        """Every GPU of the cluster's pools, the whole hour, by the exporter's model name."""
        gpus: dict[str, int] = defaultdict(int)
        for pool in GpuPool.objects.filter(cluster=self.cluster.name).select_related("gpu_model"):
            gpus[_device_name(pool.gpu_model)] += pool.node_count * pool.gpus_per_node
        return [GpuCapacity(name, Fraction(count)) for name, count in sorted(gpus.items()) if count]

    def _pods(
        self, start: datetime, end: datetime
    ) -> list[tuple[str, str, GpuRequest, tuple[Decimal, int]]]:
        """(namespace, pod, allocation, (CPU cores, memory bytes)) of every pod that ran in the
        window."""
        overlapping = Q(allocation__starts_at__lt=end, allocation__ends_at__gt=start)
        notebooks = (
            Notebook.objects.filter(overlapping, cluster=self.cluster)
            .select_related("tenant", "allocation__offering__gpu_model")
            .order_by("id")
        )
        pods = [
            (
                self.cluster.namespace_for(notebook.tenant.slug),
                f"{notebook.kubernetes_name}-0",
                notebook.allocation,
                (notebook.cpu_cores, notebook.memory_gib * GIB),
            )
            for notebook in notebooks
        ]
        served = Q(pk__in=[])
        for model_id, backend_id in GpuPool.objects.filter(cluster=self.cluster.name).values_list(
            "gpu_model_id", "backend_id"
        ):
            served |= Q(offering__gpu_model_id=model_id, offering__backend_id=backend_id)
        batches = (
            GpuRequest.objects.filter(
                served, purpose=Purpose.BATCH, starts_at__lt=end, ends_at__gt=start
            )
            .filter(notebooks__isnull=True)
            .select_related("tenant", "offering__gpu_model")
            .order_by("id")
        )
        pods += [
            (
                self.cluster.namespace_for(batch.tenant.slug),
                f"batch-{batch.pk}-{int(_unit(batch.pk) * 0xFFFFF):05x}",
                batch,
                (BATCH_CPU_CORES * batch.count, BATCH_MEMORY_GIB * GIB * batch.count),
            )
            for batch in batches
        ]
        return pods

    def _pod(
        self,
        metrics: WindowMetrics,
        *,
        namespace: str,
        pod: str,
        allocation: GpuRequest,
        start: datetime,
        seconds: int,
        wanted: set[str],
        compute: tuple[Decimal, int],
    ) -> None:
        offering: Offering = allocation.offering
        model = offering.gpu_model
        asked = False
        for name, quantity in sorted(offering.resources.items()):
            amount = _quantity(quantity)
            if amount is not None and resource_label(name) in wanted:
                label = resource_label(name)
                metrics.requests.append(
                    PodRequest(namespace, pod, label, amount * allocation.count)
                )
                asked = True
        if asked:  # as Prometheus is asked: CPU and memory of pods that ask for a GPU
            cores, memory_bytes = compute
            metrics.requests.append(PodRequest(namespace, pod, CPU, cores))
            metrics.requests.append(PodRequest(namespace, pod, MEMORY, Decimal(memory_bytes)))
        metrics.running.append(PodRunning(namespace, pod, seconds))
        busy = utilisation(pod, start)
        mig = next(
            (match for name in offering.resources if (match := MIG_RESOURCE.search(name))), None
        )
        if mig is not None:
            profile, memory_gib = mig.group(1), Decimal(mig.group(2))
            share = Decimal(1)  # a MIG instance is a device of its own; collection scales it
        else:
            profile, memory_gib = "", Decimal(model.memory_mib) / 1024
            whole = offering.whole or offering.gpu_eq >= 1
            share = (
                Decimal(1)
                if whole
                else Decimal(offering.gpu_eq.numerator) / Decimal(offering.gpu_eq.denominator)
            )
        devices = allocation.count if mig is not None or offering.whole else 1
        node = f"{model.slug}-node-{int(_unit(pod, 'node') * 4)}"
        for index in range(devices):
            uuid = f"GPU-{hashlib.sha256(f'{pod}/{index}'.encode()).hexdigest()[:32]}"
            memory_mib = memory_gib * 1024 * (Decimal("0.2") + busy * Decimal("0.7"))
            metrics.devices.append(
                DeviceUse(
                    namespace=namespace,
                    pod=pod,
                    node=node,
                    device=f"{uuid}/{index + 1}" if profile else uuid,
                    model_name=_device_name(model),
                    mig_profile=profile,
                    busy_seconds=(busy * share * seconds).quantize(Decimal(1)),
                    memory_mib_seconds=(memory_mib * share * seconds).quantize(Decimal(1)),
                )
            )

    def _platform(self, metrics: WindowMetrics, start: datetime, wanted: set[str]) -> None:
        """The platform team's inference gateway: one whole GPU, busy, not a tenant's."""
        pool = (
            GpuPool.objects.filter(cluster=self.cluster.name)
            .select_related("gpu_model")
            .order_by("id")
            .first()
        )
        if pool is None:
            return
        model = pool.gpu_model
        seconds = int(WINDOW.total_seconds())
        if "nvidia_com_gpu" in wanted:
            metrics.requests += [
                PodRequest(PLATFORM_NAMESPACE, PLATFORM_POD, "nvidia_com_gpu", Decimal(1)),
                PodRequest(PLATFORM_NAMESPACE, PLATFORM_POD, CPU, PLATFORM_CPU_CORES),
                PodRequest(
                    PLATFORM_NAMESPACE, PLATFORM_POD, MEMORY, Decimal(PLATFORM_MEMORY_GIB * GIB)
                ),
            ]
        metrics.running.append(PodRunning(PLATFORM_NAMESPACE, PLATFORM_POD, seconds))
        busy = min(utilisation(PLATFORM_POD, start) + Decimal("0.3"), Decimal(1))
        node = f"{model.slug}-node-0"
        uuid = f"GPU-{hashlib.sha256(PLATFORM_POD.encode()).hexdigest()[:32]}"
        metrics.devices.append(
            DeviceUse(
                namespace=PLATFORM_NAMESPACE,
                pod=PLATFORM_POD,
                node=node,
                device=uuid,
                model_name=_device_name(model),
                mig_profile="",
                busy_seconds=(busy * seconds).quantize(Decimal(1)),
                memory_mib_seconds=(Decimal(model.memory_mib) * Decimal("0.6") * seconds).quantize(
                    Decimal(1)
                ),
            )
        )
        if _unit(self.cluster.name, "xid", start.isoformat()) < 1 / XID_ONE_IN:
            xid = 79 if _unit(self.cluster.name, "code", start.isoformat()) < 0.5 else 48
            metrics.xids.append(XidReport(node, uuid, _device_name(model), xid))
