"""Where one hourly window's metrics come from: a cluster's Prometheus, or the demo's synthetic
source. Collection (collection.py) reads a `WindowMetrics` and never knows which.

Prometheus is asked a fixed number of queries per window, whatever the number of pods or GPUs,
all at once (collection reads the ledger meanwhile):
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Protocol, runtime_checkable

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
    labels = sample.labels
    return tuple([labels.get(name, "") for name in names])


class Reading(Protocol):
    """A window being read. `usage` waits for everything but the capacity (left empty),
    `capacity` for the capacity, the slowest of Prometheus's answers: collection attributes
    the usage meanwhile. Both raise MetricsUnavailable."""

    def usage(self) -> WindowMetrics: ...

    def capacity(self) -> list[GpuCapacity]: ...


@runtime_checkable
class StartsEarly(Protocol):
    """A source that starts reading a window before its caller needs it (`begin` sends the
    queries), so that the caller's own work in between overlaps them: collection reads the
    ledger while Prometheus answers."""

    def begin(self, start: datetime, *, resources: Iterable[str]) -> Reading: ...


class _ReadWhenAsked:
    """The Reading of a source that reads all at once when asked (the demo's, tests')."""

    def __init__(self, source: MetricsSource, start: datetime, resources: list[str]) -> None:
        self.source, self.start, self.resources = source, start, resources
        self.metrics: WindowMetrics | None = None

    def usage(self) -> WindowMetrics:
        if self.metrics is None:
            self.metrics = self.source.window(self.start, resources=self.resources)
        return replace(self.metrics, capacity=[])

    def capacity(self) -> list[GpuCapacity]:
        return self.metrics.capacity if self.metrics is not None else self.usage().capacity


def reading_whole(reading: Reading) -> WindowMetrics:
    """All of a window's metrics, the capacity included, for a caller with nothing to do
    meanwhile (a source's own `window`)."""
    metrics = reading.usage()
    metrics.capacity = reading.capacity()
    return metrics


def window_begin(source: MetricsSource, start: datetime, *, resources: Iterable[str]) -> Reading:
    """Start reading the window: at once where the source can (`StartsEarly`), else when
    first asked."""
    if isinstance(source, StartsEarly):
        return source.begin(start, resources=resources)
    return _ReadWhenAsked(source, start, list(resources))


@dataclass(frozen=True)
class _Query:
    promql: str
    at: datetime


class _PrometheusReading:
    """A window's queries, sent at once, each on a thread of its own that waits for its
    answer and parses it."""

    def __init__(self, source: "PrometheusSource", queries: dict[str, _Query]) -> None:
        self.source = source
        pool = ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="prometheus")
        try:
            self.pending = {
                name: pool.submit(source.gateway.query, query.promql, at=query.at)
                for name, query in queries.items()
            }
        finally:
            pool.shutdown(wait=False)  # each thread ends with its query

    def _answer(self, name: str) -> list[Sample]:
        try:
            return [s for s in self.pending[name].result() if s.value.is_finite()]
        except PrometheusError as error:
            for other in self.pending.values():
                other.cancel()
            raise MetricsUnavailable(str(error)) from error

    def usage(self) -> WindowMetrics:
        names = [name for name in self.pending if name != "capacity"]
        metrics = self.source.usage_read({name: self._answer(name) for name in names})
        metrics.queries = len(self.pending)
        return metrics

    def capacity(self) -> list[GpuCapacity]:
        return self.source.capacity_read(self._answer("capacity"))


class PrometheusSource:
    """A cluster's Prometheus: seven queries per window, sent at once (Prometheus evaluates
    them side by side, on as many cores as it has, instead of one after another)."""

    def __init__(self, gateway: PrometheusGateway, *, interval_seconds: int) -> None:
        self.gateway = gateway
        self.interval = Decimal(interval_seconds)
        self.interval_seconds = max(interval_seconds, 1)

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return reading_whole(self.begin(start, resources=resources))

    def begin(self, start: datetime, *, resources: Iterable[str]) -> Reading:
        return _PrometheusReading(self, self._queries(start, resources))

    def _queries(self, start: datetime, resources: Iterable[str]) -> dict[str, _Query]:
        """The window's queries by name (module docstring)."""
        at = start + WINDOW - timedelta(milliseconds=1)
        span = f"[{int(WINDOW.total_seconds())}s]"
        queries = {}
        wanted = sorted({re.escape(name) for name in resources})
        if wanted:
            requests = "kube_pod_container_resource_requests"
            gpus = f'{requests}{{resource=~"{"|".join(wanted)}"}}'
            every = f'{requests}{{resource=~"{"|".join([*wanted, *COMPUTE_RESOURCES])}"}}'
            queries["requests"] = _Query(
                # One series per container and incarnation (uid, node while pending, the
                # kube-state-metrics instance): the largest per container, summed per pod;
                # CPU and memory too, of the pods that ask for a GPU only.
                "sum by (namespace, pod, resource) (max by (namespace, pod, container, resource)"
                f" (max_over_time({every}{span})))"
                f" and on (namespace, pod) count by (namespace, pod) (max_over_time({gpus}{span}))",
                at,
            )
            queries["running"] = _Query(
                # Each incarnation (uid) of a pod ran for its own samples: summed per pod.
                "sum by (namespace, pod) (max by (namespace, pod, uid) "
                f'(sum_over_time(kube_pod_status_phase{{phase="Running"}}{span})))',
                at,
            )
        queries["utilisation"] = _Query(
            f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_DEV_GPU_UTIL{span}))", at
        )
        queries["engine_active"] = _Query(
            f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{span}))", at
        )
        queries["memory"] = _Query(
            f"sum by ({DEVICE_LABELS}) (sum_over_time(DCGM_FI_DEV_FB_USED{span}))", at
        )
        queries["xids"] = _Query(
            f"max by (Hostname, UUID, modelName) (max_over_time(DCGM_FI_DEV_XID_ERRORS{span})) > 0",
            at,
        )
        # Capacity (module docstring): evaluated one interval after the window's last
        # millisecond, so that its steps end on the window's end.
        step = self.interval_seconds
        gpus = (
            "count by (Hostname, gpu, UUID, modelName) "
            f"(count_over_time(DCGM_FI_DEV_FB_USED[{step}s] offset 1ms))"
        )
        queries["capacity"] = _Query(
            f"sum by (modelName) (count_over_time(({gpus})"
            f"[{int(WINDOW.total_seconds())}s:{step}s]))",
            start + WINDOW + timedelta(seconds=step, milliseconds=-1),
        )
        return queries

    def usage_read(self, samples: dict[str, list[Sample]]) -> WindowMetrics:
        """The window's metrics but capacity, from the queries' answers."""
        metrics = WindowMetrics(queries=len(samples))
        for sample in samples.get("requests", []):
            namespace, pod, resource = _key(sample, "namespace", "pod", "resource")
            metrics.requests.append(PodRequest(namespace, pod, resource, sample.value))
        for sample in samples.get("running", []):
            namespace, pod = _key(sample, "namespace", "pod")
            seconds = int(sample.value * self.interval)
            metrics.running.append(PodRunning(namespace, pod, seconds))
        labels = DEVICE_LABELS.split(", ")
        busy: dict[tuple[str, ...], Decimal] = {}
        for sample in samples["utilisation"]:
            busy[_key(sample, *labels)] = sample.value * self.interval / 100
        # Where the profiling metric exists (always for MIG instances) it is the better one.
        for sample in samples["engine_active"]:
            busy[_key(sample, *labels)] = sample.value * self.interval
        memory: dict[tuple[str, ...], Decimal] = {}
        for sample in samples["memory"]:
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
        for sample in samples["xids"]:
            node, uuid, model_name = _key(sample, "Hostname", "UUID", "modelName")
            metrics.xids.append(XidReport(node, uuid, model_name, int(sample.value)))
        return metrics

    def capacity_read(self, samples: list[Sample]) -> list[GpuCapacity]:
        capacity = []
        for sample in samples:
            (model_name,) = _key(sample, "modelName")
            steps = int(sample.value)
            if steps > 0:
                # Each step stands for one scrape interval, as each sample does for used hours.
                seconds = steps * self.interval_seconds
                capacity.append(GpuCapacity(model_name, Fraction(seconds, 3600)))
        return capacity
