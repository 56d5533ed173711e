"""Where one hourly window's metrics come from: a cluster's Prometheus, or the demo's synthetic
source. Collection (collection.py) reads a `WindowMetrics` and never knows which.

Prometheus is asked a fixed number of queries per window, whatever the number of pods or GPUs:
each aggregates `by (namespace, pod, …)` over the window with a range function, evaluated at the
window's last millisecond so that a sample on the hour belongs to the window that starts there.
Each sample stands for one scrape interval (`Cluster.metrics_interval_seconds`), so a sum of
samples times the interval is an integral over time:

- requests: `sum by (namespace, pod, resource) (max by (namespace, pod, container, resource)
  (max_over_time(kube_pod_container_resource_requests{resource=~"<the catalog's resources>|
  cpu|memory"}[1h]))) and on (namespace, pod) <the pods asking for one of the catalog's
  resources>`, what each pod asks for (one series per container, however many incarnations):
  its GPU resources, and its CPU (cores) and memory (bytes) when it asks for a GPU, so pods
  without one (most of a cluster) are not read at all;
- running: `sum by (namespace, pod) (max by (namespace, pod, uid) (sum_over_time(
  kube_pod_status_phase{phase="Running"}[1h])))`, the samples in which each incarnation ran;
- busy: `sum_over_time(DCGM_FI_DEV_GPU_UTIL[1h])` (percent) and
  `sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[1h])` (a ratio; MIG instances report only this),
  by device, MIG instance and pod;
- memory: `sum_over_time(DCGM_FI_DEV_FB_USED[1h])` (MiB) by the same labels;
- health: `max_over_time(DCGM_FI_DEV_XID_ERRORS[1h]) > 0` by node and GPU;
- capacity: the GPU-hours of each model present in the window, whatever they were doing. Each
  physical GPU (one `Hostname`, `gpu`, `UUID`: a MIG-partitioned or time-sliced GPU, with a
  series per instance or pod, is still one GPU) counts for each scrape interval in which the
  DCGM exporter reported it, found by a subquery stepping through the window one interval at a
  time: `sum by (modelName) (count_over_time((count by (Hostname, gpu, UUID, modelName)
  (count_over_time(DCGM_FI_DEV_FB_USED[<interval>] offset 1ms)))[1h:<interval>]))`, evaluated
  one interval after the window's last millisecond so that its steps (aligned to multiples of
  the interval) end on the window's end and each looks back over one interval inside it.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from portal.metering.prometheus import PrometheusError, PrometheusGateway, Sample

WINDOW = timedelta(hours=1)
DEVICE_LABELS = "namespace, pod, Hostname, UUID, GPU_I_ID, GPU_I_PROFILE, modelName"


class MetricsUnavailable(Exception):
    """The window's metrics could not be read (the source's reason in the message)."""


# kube-state-metrics' labels of the pod's CPU (in cores) and memory (in bytes) requests.
CPU, MEMORY = "cpu", "memory"
COMPUTE_RESOURCES = (CPU, MEMORY)


@dataclass(frozen=True)
class PodRequest:
    """A pod asks for `amount` of the resource `resource`: an extended resource as
    kube-state-metrics labels it (e.g. `nvidia_com_mig_1g_10gb` for `nvidia.com/mig-1g.10gb`),
    or `cpu` (cores) or `memory` (bytes), summed over the pod's containers."""

    namespace: str
    pod: str
    resource: str
    amount: Decimal


@dataclass(frozen=True)
class PodRunning:
    namespace: str
    pod: str
    seconds: int


@dataclass(frozen=True)
class DeviceUse:
    """One pod's view of one GPU (or MIG instance) during the window.

    `busy_seconds`: the integral of utilisation (1.0 = the whole device busy) over the window;
    `memory_mib_seconds`: the integral of framebuffer in use. When several pods share a device
    (time-slicing, memory slices), each carries the device's numbers and collection splits them.
    """

    namespace: str
    pod: str
    node: str
    device: str  # the GPU's UUID, with the MIG instance id for a MIG slice
    model_name: str
    mig_profile: str  # e.g. "1g.10gb"; empty for a whole device
    busy_seconds: Decimal
    memory_mib_seconds: Decimal


@dataclass(frozen=True)
class XidReport:
    node: str
    gpu_uuid: str
    model_name: str
    last_xid: int


@dataclass(frozen=True)
class GpuCapacity:
    """GPUs of one model (the DCGM exporter's `modelName`) present during the window, in
    GPU-hours: 8 GPUs reporting all hour are 8; one that left after 15 minutes adds 1/4."""

    model_name: str
    gpu_hours: Fraction


@dataclass
class WindowMetrics:
    requests: list[PodRequest] = field(default_factory=list)
    running: list[PodRunning] = field(default_factory=list)
    devices: list[DeviceUse] = field(default_factory=list)
    xids: list[XidReport] = field(default_factory=list)
    capacity: list[GpuCapacity] = field(default_factory=list)
    queries: int = 0


class MetricsSource(Protocol):
    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        """The metrics of [start, start + 1 h) for pods asking for `resources`
        (kube-state-metrics resource labels). Raises MetricsUnavailable."""
        ...


def resource_label(name: str) -> str:
    """kube-state-metrics' label for an extended resource: `nvidia.com/gpu` → `nvidia_com_gpu`."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _key(sample: Sample, *names: str) -> tuple[str, ...]:
    return tuple(sample.labels.get(name, "") for name in names)


class PrometheusSource:
    """A cluster's Prometheus: seven queries per window."""

    def __init__(self, gateway: PrometheusGateway, *, interval_seconds: int) -> None:
        self.gateway = gateway
        self.interval = Decimal(interval_seconds)
        self.interval_seconds = max(interval_seconds, 1)

    def _query(self, metrics: WindowMetrics, promql: str, at: datetime) -> list[Sample]:
        metrics.queries += 1
        try:
            return [s for s in self.gateway.query(promql, at=at) if s.value.is_finite()]
        except PrometheusError as error:
            raise MetricsUnavailable(str(error)) from error

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        at = start + WINDOW - timedelta(milliseconds=1)
        span = f"[{int(WINDOW.total_seconds())}s]"
        metrics = WindowMetrics()
        wanted = sorted({re.escape(name) for name in resources})
        if wanted:
            requests = "kube_pod_container_resource_requests"
            gpus = f'{requests}{{resource=~"{"|".join(wanted)}"}}'
            every = f'{requests}{{resource=~"{"|".join([*wanted, *COMPUTE_RESOURCES])}"}}'
            for sample in self._query(
                metrics,
                # One series per container and incarnation (uid, node while pending, the
                # kube-state-metrics instance): the largest per container, summed per pod;
                # CPU and memory too, of the pods that ask for a GPU only.
                "sum by (namespace, pod, resource) (max by (namespace, pod, container, resource)"
                f" (max_over_time({every}{span})))"
                f" and on (namespace, pod) count by (namespace, pod) (max_over_time({gpus}{span}))",
                at,
            ):
                namespace, pod, resource = _key(sample, "namespace", "pod", "resource")
                metrics.requests.append(PodRequest(namespace, pod, resource, sample.value))
            for sample in self._query(
                metrics,
                # Each incarnation (uid) of a pod ran for its own samples: summed per pod.
                "sum by (namespace, pod) (max by (namespace, pod, uid) "
                f'(sum_over_time(kube_pod_status_phase{{phase="Running"}}{span})))',
                at,
            ):
                namespace, pod = _key(sample, "namespace", "pod")
                seconds = int(sample.value * self.interval)
                metrics.running.append(PodRunning(namespace, pod, seconds))
        labels = DEVICE_LABELS.split(", ")
        busy: dict[tuple[str, ...], Decimal] = {}
        for sample in self._query(
            metrics, f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_DEV_GPU_UTIL{span}))", at
        ):
            busy[_key(sample, *labels)] = sample.value * self.interval / 100
        # Where the profiling metric exists (always for MIG instances) it is the better one.
        for sample in self._query(
            metrics,
            f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{span}))",
            at,
        ):
            busy[_key(sample, *labels)] = sample.value * self.interval
        memory: dict[tuple[str, ...], Decimal] = {}
        for sample in self._query(
            metrics, f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_DEV_FB_USED{span}))", at
        ):
            memory[_key(sample, *labels)] = sample.value * self.interval
        for key in sorted(busy.keys() | memory.keys()):
            namespace, pod, node, uuid, instance, profile, model_name = key
            metrics.devices.append(
                DeviceUse(
                    namespace=namespace,
                    pod=pod,
                    node=node,
                    device=f"{uuid}/{instance}" if instance else uuid,
                    model_name=model_name,
                    mig_profile=profile,
                    busy_seconds=busy.get(key, Decimal(0)),
                    memory_mib_seconds=memory.get(key, Decimal(0)),
                )
            )
        for sample in self._query(
            metrics,
            f"max by (Hostname, UUID, modelName) (max_over_time(DCGM_FI_DEV_XID_ERRORS{span})) > 0",
            at,
        ):
            node, uuid, model_name = _key(sample, "Hostname", "UUID", "modelName")
            metrics.xids.append(XidReport(node, uuid, model_name, int(sample.value)))
        metrics.capacity = self._capacity(metrics, start)
        return metrics

    def _capacity(self, metrics: WindowMetrics, start: datetime) -> list[GpuCapacity]:
        """GPU-hours of each model present in the window (module docstring, "capacity")."""
        step = self.interval_seconds
        gpus = (
            "count by (Hostname, gpu, UUID, modelName) "
            f"(count_over_time(DCGM_FI_DEV_FB_USED[{step}s] offset 1ms))"
        )
        promql = (
            f"sum by (modelName) (count_over_time(({gpus})"
            f"[{int(WINDOW.total_seconds())}s:{step}s]))"
        )
        at = start + WINDOW + timedelta(seconds=step, milliseconds=-1)
        capacity = []
        for sample in self._query(metrics, promql, at):
            (model_name,) = _key(sample, "modelName")
            steps = int(sample.value)
            if steps > 0:
                # Each step stands for one scrape interval, as each sample does for used hours.
                capacity.append(GpuCapacity(model_name, Fraction(steps * step, 3600)))
        return capacity
