"""Usage for page tests, made by the real collection code from a metrics source double.

`FakeSource` implements the `MetricsSource` protocol (the network edge: in production a
cluster's Prometheus) and answers each window with the metrics a test gave for it.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from html.parser import HTMLParser

from django.utils import timezone

from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.sources import (
    DeviceUse,
    PodRequest,
    PodRunning,
    WindowMetrics,
    XidReport,
)
from portal.workloads.models import Notebook
from portal.workloads.services import notebook_launch
from tenants.models import Tenant

A100 = "NVIDIA A100-SXM4-80GB"


class FakeSource:
    """A MetricsSource double: the metrics of each window a test set, nothing elsewhere."""

    def __init__(self) -> None:
        self.windows: dict[datetime, WindowMetrics] = {}

    def at(self, start: datetime) -> WindowMetrics:
        return self.windows.setdefault(start, WindowMetrics())

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return self.windows.get(start, WindowMetrics())

    def pod(
        self,
        start: datetime,
        *,
        namespace: str,
        pod: str,
        busy_seconds: int,
        gpus: int = 1,
        node: str = "gpu-node-1",
        device: str = "GPU-1",
    ) -> None:
        """A pod holding `gpus` whole GPUs for the whole window, busy for `busy_seconds`."""
        metrics = self.at(start)
        metrics.requests.append(PodRequest(namespace, pod, "nvidia_com_gpu", Decimal(gpus)))
        metrics.running.append(PodRunning(namespace, pod, 3600))
        metrics.devices.append(
            DeviceUse(
                namespace=namespace,
                pod=pod,
                node=node,
                device=device,
                model_name=A100,
                mig_profile="",
                busy_seconds=Decimal(busy_seconds),
                memory_mib_seconds=Decimal(1024 * 3600),
            )
        )

    def xid(self, start: datetime, *, node: str, gpu: str, xid: int) -> None:
        self.at(start).xids.append(XidReport(node, gpu, A100, xid))


def metered_cluster(*, demo: bool = False, at: datetime | None = None) -> Cluster:
    cluster = cluster_create(actor=None, name="demo")
    metering_begin(cluster=cluster, at=at or timezone.now(), demo=demo)
    return cluster


def collect(cluster: Cluster, source: FakeSource, starts: Iterable[datetime]) -> None:
    """Collect each window in order through the real collection code."""
    for start in sorted(starts):
        window_collect(cluster, start, source)


@dataclass
class Scenario:
    """Tenant A on cluster `demo`, collected over four days up to the next hour:
    - the developer's notebook on a whole A100 (busy for the whole next hour);
    - the lead's allocation of a whole A100 holding quota and unused (idle);
    - a training pod `train-0` in the tenant's namespace on each of the three days before,
      holding one A100 for an hour and busy half of it;
    - a pod in an unmanaged namespace `ml-shared`, and an XID error on `gpu-node-2`."""

    cluster: Cluster
    source: FakeSource
    now_hour: datetime
    notebook: Notebook
    busy: GpuRequest
    idle: GpuRequest
    starts: list[datetime] = field(default_factory=list)

    @property
    def params(self) -> dict[str, str]:
        """The period every window falls in, whatever the time of day the test runs."""
        return {
            "from": (self.now_hour - timedelta(days=3)).date().isoformat(),
            "to": (self.now_hour + timedelta(hours=1)).date().isoformat(),
        }


def scenario(
    *,
    tenant: Tenant,
    developer,
    lead,
    offering: Offering,
    pods_per_day: int = 1,
    demo: bool = False,
) -> Scenario:
    now_hour = hour_floor(timezone.now())
    cluster = metered_cluster(demo=demo, at=now_hour - timedelta(days=3))
    busy = gpu_request_submit(actor=developer, tenant=tenant, offering=offering, count=1)
    notebook = notebook_launch(
        actor=developer,
        allocation_id=busy.pk,
        image="minimal-python",
        cpu_cores="2",
        memory_gib=8,
        workspace_gib=10,
    )
    idle = gpu_request_submit(actor=lead, tenant=tenant, offering=offering, count=1)
    source = FakeSource()
    namespace = cluster.namespace_for(tenant.slug)
    following = now_hour + timedelta(hours=1)
    source.pod(
        following,
        namespace=namespace,
        pod=f"{notebook.kubernetes_name}-0",
        busy_seconds=3600,
        device="GPU-NB",
    )
    starts = [now_hour, following]
    for days in (1, 2, 3):
        start = now_hour - timedelta(days=days)
        for index in range(pods_per_day):
            source.pod(
                start,
                namespace=namespace,
                pod=f"train-{index}",
                busy_seconds=1800,
                device=f"GPU-{index}",
            )
        starts.append(start)
    source.pod(
        now_hour - timedelta(days=1),
        namespace="ml-shared",
        pod="x",
        busy_seconds=3600,
        device="GPU-X",
    )
    source.xid(now_hour - timedelta(days=1), node="gpu-node-2", gpu="GPU-BAD", xid=79)
    collect(cluster, source, starts)
    return Scenario(cluster, source, now_hour, notebook, busy, idle, starts)


class TableReader(HTMLParser):
    """The cells of each `<table data-table="name">` on a page, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: str | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        name = found.get("data-table")
        if tag == "table" and name:
            self.current = name
            self.tables[name] = []
        elif self.current and tag == "tr":
            self.row = []
        elif self.current and tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None and self.current:
            self.tables[self.current].append(self.row)
            self.row = None
        elif tag == "table":
            self.current = None


def tables_of(html: str) -> dict[str, list[list[str]]]:
    """Each usage table of a page: the header row first, then the rows."""
    reader = TableReader()
    reader.feed(html)
    return reader.tables
