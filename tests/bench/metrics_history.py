"""A GPU fleet's hour of metrics, as kube-state-metrics and the DCGM exporter expose them, for the
metering benchmark (bench_metering.py): planned here, written as OpenMetrics for
`promtool tsdb create-blocks-from openmetrics`, and added up as it is written.

tests/metering/history.py builds its text in memory, which suits a handful of pods; an hour of
10,000 GPUs is some 15 million samples (about 3 GB of text), so this module plans the fleet as a
list of series and streams their samples to the file one series at a time.

The fleet (`fleet_plan`): nodes of 8 GPUs in five pools, as a share of the GPUs: H100 whole
(40 %), A100-80GB whole (25 %), A100-80GB MIG (15 %, each GPU cut into 3g.40gb + 2g.20gb +
1g.10gb + 1g.10gb), A100-80GB time-sliced in quarters (10 %), T4 whole (10 %). Whole GPUs go to
pods of 1, 2, 4 or 8 GPUs (a fifth of the one-GPU pods are notebooks), a few stay idle, a few are
busy with no pod (a process the exporter maps to no pod), a few run pods in namespaces the portal
does not manage; some GPUs change hands during the hour (one pod ends, another starts after an
idle gap). MIG instances and time-sliced GPUs go to one pod each (a share of them notebooks).
Every pod in a tenant's namespace runs on an allocation of the ledger, which begins before and
ends after it; a few allocations have no pod. Beside the GPU pods run CPU-only pods (half as many
as the GPUs), which metering must not read.

The series, one sample per scrape interval, each scrape target at its own offset within the
interval as Prometheus spreads them: `kube_pod_status_phase{phase="Running"}` and
`kube_pod_container_resource_requests` (GPU resource, cpu, memory) per pod from kube-state-
metrics (the other phases, whose series a real kube-state-metrics also writes, are left out:
the queries select Running by label and never read them); `DCGM_FI_DEV_GPU_UTIL` (whole and
time-sliced GPUs), `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (H100s and MIG instances), `DCGM_FI_DEV_FB_USED`
per GPU or MIG instance and pod, and `DCGM_FI_DEV_XID_ERRORS` per GPU. Each series begins one
interval before the window and ends one after it when it lasts the hour, so that the window's
edges are tested too.
"""

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import IO

INTERVAL = 30
HOUR = 3600
GPUS_PER_NODE = 8
GIB = 2**30
# Prometheus scrapes kube-state-metrics at this offset within each interval (seconds).
KSM_OFFSET = 11.437
UNMANAGED_NAMESPACES = ("kube-system", "ml-platform", "t-legacy-research")
# (pool, GPU model's DCGM modelName, catalog model slug, backend, share of the GPUs)
POOLS = (
    ("h100-whole", "NVIDIA H100 80GB HBM3", "h100-80gb", "whole", 0.40),
    ("a100-whole", "NVIDIA A100-SXM4-80GB", "a100-80gb", "whole", 0.25),
    ("a100-mig", "NVIDIA A100-SXM4-80GB", "a100-80gb", "mig", 0.15),
    ("a100-shared", "NVIDIA A100-SXM4-80GB", "a100-80gb", "time-slicing", 0.10),
    ("t4-whole", "Tesla T4", "t4", "whole", 0.10),
)
# The MIG layout of each A100 of the MIG pool: (GPU_I_ID, profile, compute slices).
MIG_LAYOUT = ((1, "3g.40gb", 3), (5, "2g.20gb", 2), (13, "1g.10gb", 1), (14, "1g.10gb", 1))
MEMORY_MIB = {"h100-80gb": 81920, "a100-80gb": 81920, "t4": 15360}
# Text of the values, made once: integer percents, and the same as ratios.
_PERCENT = [str(value) for value in range(101)]
_RATIO = [repr(value / 100) for value in range(101)]


@dataclass
class Pod:
    """A pod holding GPUs (or, with `resource` empty, none). Times are seconds from the start of
    the window, [begin, end). A notebook's `name` is set once its row exists."""

    namespace: str
    name: str
    uid: str
    node: str
    tenant: int | None  # the tenant's index, None in a namespace no tenant owns
    offering: str  # catalog slug; empty for a CPU-only pod
    resource: str  # kube-state-metrics' label of the GPU resource asked for
    count: int
    gpu_eq: Fraction
    begin: int
    end: int
    cpu: int
    memory_gib: int
    notebook: bool = False
    # The allocation in the ledger the pod runs on: [begin, end) in seconds from the start.
    allocation: tuple[int, int] | None = None


@dataclass
class Segment:
    """A stretch of time [begin, end) a device spends with the same pods (none: idle, or busy
    with no pod) and the same load: `util` percent, varying a little from sample to sample."""

    pods: tuple[Pod, ...]
    begin: int
    end: int
    util: int
    fb_mib: int


@dataclass
class Device:
    """A GPU, or one MIG instance of it, as the DCGM exporter labels it."""

    node: str
    gpu: int
    uuid: str
    model_name: str
    offset: float  # of its node's exporter within the scrape interval, seconds
    instance: str = ""
    profile: str = ""
    size: Fraction = Fraction(1)  # of a GPU: compute slices / 7 for a MIG instance
    util_metric: bool = True
    engine_metric: bool = False
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Reservation:
    """An allocation with no pod on it (reserved only)."""

    tenant: int
    offering: str
    count: int
    gpu_eq: Fraction
    begin: int
    end: int


@dataclass
class Fleet:
    tag: str
    gpus: int
    pods: list[Pod] = field(default_factory=list)
    cpu_pods: list[Pod] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    gpu_models: Counter[str] = field(default_factory=Counter)  # modelName → GPUs
    xid_gpus: list[Device] = field(default_factory=list)


@dataclass
class Truth:
    """What a window holds, added up from the samples written (exact fractions)."""

    reserved: Fraction = Fraction(0)
    requested: Fraction = Fraction(0)
    used_gpu_hours: Fraction = Fraction(0)
    unattributed_used: Fraction = Fraction(0)
    memory_gib_hours: Fraction = Fraction(0)
    cpu_core_hours: Fraction = Fraction(0)
    ram_gib_hours: Fraction = Fraction(0)
    capacity: dict[str, Fraction] = field(default_factory=dict)
    notebooks: int = 0
    xid_gpus: int = 0
    samples: int = 0


def _uid(rng: random.Random) -> str:
    text = f"{rng.getrandbits(128):032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class _Planner:
    """Plans one fleet, pool by pool and node by node, with one seeded random generator: the
    same arguments give the same fleet on every run."""

    def __init__(self, tag: str, gpus: int, tenants: int, seed: int) -> None:
        self.rng = random.Random(f"{seed}-{tag}")
        self.fleet = Fleet(tag=tag, gpus=0)
        self.tenants = tenants
        self.count = 0
        self.full = (-INTERVAL, HOUR + INTERVAL)  # a whole hour, with one sample either side
        self.gpus = gpus

    def pod(
        self, node: str, offering: str, resource: str, count: int, gpu_eq: Fraction, *,
        begin: int, end: int, managed: bool = True, notebook: bool = False,
    ) -> Pod:  # fmt: skip
        """A pod on `node` in a random tenant's namespace (or, not `managed`, in one no tenant
        owns), on an allocation from 1 to 50 minutes before `begin` to 1 to 50 after `end`."""
        rng = self.rng
        self.count += 1
        tenant = rng.randrange(self.tenants) if managed else None
        namespace = (  # a tenant's is named by fleet_namespaces
            f"#{tenant}"
            if tenant is not None
            else UNMANAGED_NAMESPACES[self.count % len(UNMANAGED_NAMESPACES)]
        )
        kind = "nb" if notebook else rng.choice(("train", "finetune", "infer", "eval"))
        pod = Pod(
            namespace=namespace,
            name=f"{kind}-{self.fleet.tag}-{self.count:06d}-{rng.getrandbits(20):05x}",
            uid=_uid(rng),
            node=node,
            tenant=tenant,
            offering=offering,
            resource=resource,
            count=count,
            gpu_eq=gpu_eq * count,
            begin=begin,
            end=end,
            cpu=4 * max(1, round(gpu_eq * count)),
            memory_gib=32 * max(1, round(gpu_eq * count)),
            notebook=notebook,
        )
        if tenant is not None:
            pod.allocation = (begin - rng.randrange(60, 3000), end + rng.randrange(60, 3000))
        self.fleet.pods.append(pod)
        return pod

    def segment(self, pods: tuple[Pod, ...], span: tuple[int, int], model: str) -> Segment:
        rng = self.rng
        util = rng.randrange(5, 100) if pods else 0
        fb_mib = rng.randrange(1024, MEMORY_MIB[model]) if pods else 0
        return Segment(pods, span[0], span[1], util, fb_mib)

    def whole_node(self, node: str, devices: list[Device], model: str) -> None:
        """Pods of 1, 2, 4 or 8 GPUs on one node of whole GPUs, and the odd idle GPU."""
        rng = self.rng
        offering = f"{model}-whole"
        free = list(devices)
        while free:
            pick = rng.random()
            if pick < 0.08:  # idle all hour
                device = free.pop(0)
                device.segments.append(Segment((), *self.full, util=0, fb_mib=0))
            elif pick < 0.09:  # busy with no pod
                device = free.pop(0)
                device.segments.append(Segment((), *self.full, util=30, fb_mib=2048))
            elif pick < 0.13:  # a pod in a namespace no tenant owns
                device = free.pop(0)
                pod = self.pod(node, offering, "nvidia_com_gpu", 1, Fraction(1),
                               begin=self.full[0], end=self.full[1], managed=False)  # fmt: skip
                device.segments.append(self.segment((pod,), self.full, model))
            elif pick < 0.22:  # one GPU changing hands: a pod ends, another starts later
                device = free.pop(0)
                ends = rng.randrange(600, 2400)
                starts = ends + rng.randrange(120, 900)
                first = self.pod(node, offering, "nvidia_com_gpu", 1, Fraction(1),
                                 begin=self.full[0], end=ends)  # fmt: skip
                second = self.pod(node, offering, "nvidia_com_gpu", 1, Fraction(1),
                                  begin=starts, end=self.full[1])  # fmt: skip
                device.segments += [
                    self.segment((first,), (self.full[0], ends), model),
                    Segment((), ends, starts, util=0, fb_mib=0),
                    self.segment((second,), (starts, self.full[1]), model),
                ]
            else:
                size = rng.choices((1, 2, 4, 8), weights=(50, 20, 15, 15))[0]
                while size > len(free):
                    size //= 2
                held, free = free[:size], free[size:]
                notebook = size == 1 and rng.random() < 0.2
                pod = self.pod(
                    node,
                    offering,
                    "nvidia_com_gpu",
                    size,
                    Fraction(1),
                    begin=self.full[0],
                    end=self.full[1],
                    notebook=notebook,
                )
                for device in held:
                    device.segments.append(self.segment((pod,), self.full, model))

    def mig_gpu(self, node: str, device: Device) -> list[Device]:
        """One A100 cut into four MIG instances, each idle or held by one pod."""
        rng = self.rng
        instances = []
        for instance, profile, slices in MIG_LAYOUT:
            one = Device(
                node=node, gpu=device.gpu, uuid=device.uuid, model_name=device.model_name,
                offset=device.offset, instance=str(instance), profile=profile,
                size=Fraction(slices, 7), util_metric=False, engine_metric=True,
            )  # fmt: skip
            pick = rng.random()
            if pick < 0.1:
                one.segments.append(Segment((), *self.full, util=0, fb_mib=0))
            else:
                offering = f"a100-80gb-mig-{profile.replace('.', '-')}"
                resource = f"nvidia_com_mig_{profile.replace('.', '_')}"
                pod = self.pod(
                    node, offering, resource, 1, Fraction(slices, 7),
                    begin=self.full[0], end=self.full[1], managed=pick >= 0.14,
                    notebook=pick >= 0.14 and rng.random() < 0.2,
                )  # fmt: skip
                one.segments.append(self.segment((pod,), self.full, "a100-80gb"))
            instances.append(one)
        return instances

    def shared_gpu(self, node: str, device: Device) -> None:
        """One time-sliced A100 (four replicas) with up to four pods, each asking for one."""
        rng = self.rng
        pods = tuple(
            self.pod(
                node,
                "a100-80gb-time-slicing-1-4",
                "nvidia_com_gpu_shared",
                1,
                Fraction(1, 4),
                begin=self.full[0],
                end=self.full[1],
                notebook=rng.random() < 0.2,
            )
            for _ in range(rng.choice((0, 1, 2, 3, 4, 4)))
        )
        device.segments.append(self.segment(pods, self.full, "a100-80gb"))

    def plan(self) -> Fleet:
        fleet, rng = self.fleet, self.rng
        node_number = 0
        for pool, model_name, model, backend, share in POOLS:
            for _ in range(max(1, round(self.gpus * share / GPUS_PER_NODE))):
                node_number += 1
                node = f"gpu-{pool}-{node_number:04d}"
                offset = round(node_number * 7.919 % INTERVAL, 3)
                gpus = [
                    Device(
                        node=node,
                        gpu=index,
                        uuid=f"GPU-{node_number:04x}{index:04x}-5e1c-4a2b-9d3f-{node_number:012x}",
                        model_name=model_name,
                        offset=offset,
                        engine_metric=model == "h100-80gb",
                    )
                    for index in range(GPUS_PER_NODE)
                ]
                fleet.gpus += len(gpus)
                fleet.gpu_models[model_name] += len(gpus)
                if rng.random() < 0.02:
                    fleet.xid_gpus.append(gpus[rng.randrange(len(gpus))])
                if backend == "whole":
                    self.whole_node(node, gpus, model)
                    fleet.devices += gpus
                elif backend == "mig":
                    for gpu in gpus:
                        fleet.devices += self.mig_gpu(node, gpu)
                else:
                    for gpu in gpus:
                        self.shared_gpu(node, gpu)
                    fleet.devices += gpus
        # Allocations with no pod: a few, starting and ending at any time around the window.
        asked = [
            (p.tenant, p.offering, p.count, p.gpu_eq) for p in fleet.pods if p.tenant is not None
        ]
        for tenant, offering, count, gpu_eq in rng.sample(asked, max(1, len(asked) // 30)):
            # Within 40 minutes of the window: apart from another window two hours away.
            begin = rng.randrange(-2400, 2400)
            fleet.reservations.append(
                Reservation(
                    tenant, offering, count, gpu_eq, begin, begin + rng.randrange(600, 3600)
                )
            )
        for number in range(self.gpus // 2):
            self.count += 1
            fleet.cpu_pods.append(
                Pod(
                    namespace=f"#{rng.randrange(self.tenants)}",
                    uid=_uid(rng),
                    name=f"web-{fleet.tag}-{number:06d}-{rng.getrandbits(20):05x}",
                    node=f"cpu-{number % 200:04d}",
                    tenant=None,
                    offering="",
                    resource="",
                    count=0,
                    gpu_eq=Fraction(0),
                    begin=self.full[0],
                    end=self.full[1],
                    cpu=rng.choice((1, 2, 4)),
                    memory_gib=rng.choice((2, 4, 8)),
                )
            )
        return fleet


def fleet_plan(tag: str, *, gpus: int, tenants: int, seed: int = 19) -> Fleet:
    """About `gpus` GPUs in whole nodes (at least one node per pool) and their pods, in
    `tenants` tenants (namespaces `#<index>` until `fleet_namespaces` names them)."""
    return _Planner(tag, gpus, tenants, seed).plan()


def fleet_namespaces(fleet: Fleet, namespaces: list[str]) -> None:
    """Give the pods of tenant i the namespace `namespaces[i]`."""
    for pod in [*fleet.pods, *fleet.cpu_pods]:
        if pod.namespace.startswith("#"):
            pod.namespace = namespaces[int(pod.namespace[1:])]


# Writing


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{name}="{value}"' for name, value in labels.items())


def _steps(begin: int, end: int, offset: float) -> range:
    """The sample numbers k of a target at `offset`, whose samples at offset + k x interval
    fall in [begin, end)."""
    first = -((offset - begin) // INTERVAL)  # the smallest k with offset + k x I >= begin
    last = -((offset - end) // INTERVAL)  # the smallest k with offset + k x I >= end
    return range(int(first), int(last))


def _in_window(steps: range, offset: float) -> range:
    window = _steps(0, HOUR, offset)
    return range(max(steps.start, window.start), min(steps.stop, window.stop))


class _Writer:
    def __init__(self, out: IO[str], start: datetime) -> None:
        self.out = out
        self.start = start.timestamp()
        self.times: dict[float, dict[int, str]] = {}
        self.samples = 0

    def time(self, offset: float, k: int) -> str:
        times = self.times.setdefault(offset, {})
        text = times.get(k)
        if text is None:
            text = times[k] = f" {self.start + offset + k * INTERVAL:.3f}\n"
        return text

    def constant(self, head: str, value: str, steps: range, offset: float) -> None:
        prefix = f"{head} {value}"
        self.out.write("".join(prefix + self.time(offset, k) for k in steps))
        self.samples += len(steps)

    def varying(self, head: str, values: list[str], steps: range, offset: float) -> None:
        self.out.write(
            "".join(
                f"{head} {value}{self.time(offset, k)}"
                for k, value in zip(steps, values, strict=True)
            )
        )
        self.samples += len(steps)


def _utils(segment: Segment, steps: range, salt: int) -> list[int]:
    """The segment's utilisation, percent, at each step: its level, give or take 5."""
    base = segment.util
    if not base:
        return [0] * len(steps)
    return [max(0, min(100, base + (k * 7 + salt) % 11 - 5)) for k in steps]


def _ksm(fleets: list[tuple[Fleet, datetime]], out: IO[str], truths: list[Truth]) -> int:
    samples = 0
    out.write("# TYPE kube_pod_status_phase gauge\n")
    for (fleet, start), truth in zip(fleets, truths, strict=True):
        writer = _Writer(out, start)
        for pod in [*fleet.pods, *fleet.cpu_pods]:
            steps = _steps(pod.begin, pod.end, KSM_OFFSET)
            labels = {
                "namespace": pod.namespace, "pod": pod.name, "uid": pod.uid, "phase": "Running",
                "job": "kube-state-metrics", "instance": "10.0.0.17:8080",
            }  # fmt: skip
            writer.constant(f"kube_pod_status_phase{{{_labels(labels)}}}", "1", steps, KSM_OFFSET)
            if pod.resource:
                seconds = len(_in_window(steps, KSM_OFFSET)) * INTERVAL
                truth.requested += Fraction(seconds, HOUR) * pod.gpu_eq
                truth.cpu_core_hours += Fraction(seconds, HOUR) * pod.cpu
                truth.ram_gib_hours += Fraction(seconds, HOUR) * pod.memory_gib
        samples += writer.samples
    out.write("# TYPE kube_pod_container_resource_requests gauge\n")
    for fleet, start in fleets:
        writer = _Writer(out, start)
        for pod in [*fleet.pods, *fleet.cpu_pods]:
            steps = _steps(pod.begin, pod.end, KSM_OFFSET)
            asks = [("cpu", "core", str(pod.cpu)), ("memory", "byte", str(pod.memory_gib * GIB))]
            if pod.resource:
                asks.insert(0, (pod.resource, "integer", str(pod.count)))
            for resource, unit, amount in asks:
                labels = {
                    "namespace": pod.namespace, "pod": pod.name, "uid": pod.uid,
                    "container": "main", "node": pod.node, "resource": resource, "unit": unit,
                    "job": "kube-state-metrics", "instance": "10.0.0.17:8080",
                }  # fmt: skip
                head = f"kube_pod_container_resource_requests{{{_labels(labels)}}}"
                writer.constant(head, amount, steps, KSM_OFFSET)
        samples += writer.samples
    return samples


def _device_labels(device: Device, pod: Pod | None) -> dict[str, str]:
    labels = {
        "gpu": str(device.gpu), "UUID": device.uuid, "device": f"nvidia{device.gpu}",
        "modelName": device.model_name, "Hostname": device.node,
        "DCGM_FI_DRIVER_VERSION": "550.90.07", "job": "dcgm-exporter",
        "instance": f"{device.node}:9400",
    }  # fmt: skip
    if device.instance:
        labels |= {"GPU_I_ID": device.instance, "GPU_I_PROFILE": device.profile}
    if pod is not None:
        labels |= {"namespace": pod.namespace, "pod": pod.name, "container": "main"}
    return labels


def _dcgm(fleets: list[tuple[Fleet, datetime]], out: IO[str], truths: list[Truth]) -> int:
    samples = 0
    families = (
        ("DCGM_FI_DEV_GPU_UTIL", "util"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "engine"),
        ("DCGM_FI_DEV_FB_USED", "memory"),
    )
    for metric, family in families:
        out.write(f"# TYPE {metric} gauge\n")
        for (fleet, start), truth in zip(fleets, truths, strict=True):
            writer = _Writer(out, start)
            for device in fleet.devices:
                if (family == "util" and not device.util_metric) or (
                    family == "engine" and not device.engine_metric
                ):
                    continue
                for salt, segment in enumerate(device.segments):
                    steps = _steps(segment.begin, segment.end, device.offset)
                    inside = _in_window(steps, device.offset)
                    if family == "memory":
                        values = [str(segment.fb_mib)] * len(steps)
                        seconds = len(inside) * INTERVAL
                        truth.memory_gib_hours += Fraction(segment.fb_mib * seconds, 1024 * HOUR)
                    else:
                        utils = _utils(segment, steps, salt)
                        text = _PERCENT if family == "util" else _RATIO
                        values = [text[util] for util in utils]
                        counted = family == "engine" or not device.engine_metric
                        if counted:  # the engine's activity, where it is written, is what counts
                            busy = sum(utils[k - steps.start] for k in inside)
                            used = Fraction(busy * INTERVAL, 100 * HOUR) * device.size
                            truth.used_gpu_hours += used
                            if not segment.pods or segment.pods[0].tenant is None:
                                truth.unattributed_used += used
                    for pod in segment.pods or (None,):
                        head = f"{metric}{{{_labels(_device_labels(device, pod))}}}"
                        writer.varying(head, values, steps, device.offset)
            samples += writer.samples
    return samples + _xids(fleets, out, truths)


def _xids(fleets: list[tuple[Fleet, datetime]], out: IO[str], truths: list[Truth]) -> int:
    samples = 0
    out.write("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n")
    for (fleet, start), truth in zip(fleets, truths, strict=True):
        writer = _Writer(out, start)
        failing = {id(device) for device in fleet.xid_gpus}
        for device in fleet.devices:
            if device.instance not in ("", "1"):
                continue  # one series per GPU, not per MIG instance
            steps = _steps(-INTERVAL, HOUR + INTERVAL, device.offset)
            values = ["0"] * len(steps)
            if id(device) in failing or (device.instance and _same_gpu(device, fleet.xid_gpus)):
                values[len(values) // 2 :] = ["79"] * (len(values) - len(values) // 2)
                truth.xid_gpus += 1
            head = f"DCGM_FI_DEV_XID_ERRORS{{{_labels(_device_labels(device, None))}}}"
            writer.varying(head, values, steps, device.offset)
        samples += writer.samples
    return samples


def _same_gpu(device: Device, gpus: list[Device]) -> bool:
    return any(gpu.uuid == device.uuid for gpu in gpus)


def openmetrics_write(path: Path, fleets: list[tuple[Fleet, datetime]]) -> list[Truth]:
    """Write each fleet's hour starting at its datetime to `path`, one family after another;
    return, per fleet, what its window holds."""
    truths = [Truth() for _ in fleets]
    for (fleet, _), truth in zip(fleets, truths, strict=True):
        truth.capacity = {model: Fraction(gpus) for model, gpus in fleet.gpu_models.items()}
        truth.notebooks = sum(pod.notebook for pod in fleet.pods)
        for pod in fleet.pods:
            if pod.allocation is not None:
                begin, end = max(pod.allocation[0], 0), min(pod.allocation[1], HOUR)
                truth.reserved += Fraction(max(end - begin, 0), HOUR) * pod.gpu_eq
        for reservation in fleet.reservations:
            begin, end = max(reservation.begin, 0), min(reservation.end, HOUR)
            truth.reserved += Fraction(max(end - begin, 0), HOUR) * reservation.gpu_eq
    with path.open("w", buffering=2**22) as out:
        samples = _ksm(fleets, out, truths) + _dcgm(fleets, out, truths)
        out.write("# EOF\n")
    truths[0].samples = samples  # of the whole file
    return truths
