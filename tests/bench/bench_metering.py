"""Metering (issue 19, target 3): one hourly window of 10,000 GPUs collected from a real
Prometheus holding that data, in <= 5 s and a fixed number of Prometheus queries.

1. The data: max(100, round(10,000 x BENCH_SCALE)) GPUs (tests/bench/metrics_history.py says
   which: five pools of whole, MIG and time-sliced GPUs; pods of tenants' notebooks and batch
   jobs, pods in namespaces no tenant owns, idle GPUs, GPUs changing hands within the hour) for
   the window measured, and a tenth of them for a window two hours earlier, in one cluster.
   Written through the project's services: the catalog (`catalog_presets_load`), the tenants
   (`tenant_create`, max(4, round(400 x BENCH_SCALE))), the cluster (`cluster_create`), its
   pools (`gpu_pool_create`), the metering start (`metering_begin`). Written with bulk inserts
   (`bulk_create`), since a service call per row would launch and provision each notebook: one
   user per tenant, its membership, an allocation (GPU request) for every tenant pod and a few
   with no pod, and the notebook rows of notebook pods (their ids name the pods).
2. The metrics: every series as kube-state-metrics and the DCGM exporter write them, scraped
   every 30 s (the DCGM exporter's default collection interval, and the tests'), streamed to an
   OpenMetrics file, turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`,
   served by a Prometheus started on them (tests/metering/history.py's server).
3. Measured: `window_collect`, the portal's collection of one window (its queries to
   Prometheus, attribution, and the writes), first for the tenth, then for the whole fleet,
   then the whole fleet's again (a recollection, as after a failure), each with the part spent
   reading the metrics; then once more under cProfile (var/bench/metering.prof), to say where
   the time goes, and each of the seven queries alone, one after another, to say which of them
   Prometheus spends its time on. Counted: the queries Prometheus answered (its own counter)
   and the SQL statements of each collection (Django's log: the records' COPY is not in it).
4. Checked against the totals added up while the samples were written: reserved and requested
   GPU-eq-hours exactly, used GPU-hours, GPU memory GiB-hours, CPU core-hours and RAM
   GiB-hours within the records' rounding, unattributed used GPU-hours, the GPU-hours of each
   model present (capacity) exactly, one record per notebook, the GPUs reporting XID errors;
   and the recollection ends with the same sums. A wrong result fails the benchmark.

Prints a table, writes var/bench/metering.json, and ends with `N/M targets met (metering)`:
the whole fleet's window in <= 5 s; as many Prometheus queries for the tenth as for the whole,
and as many as the source's seven; no more SQL statements for the whole than for the tenth, but
for the bulk inserts' batches of 2,000 rows. A missed target is reported, not failed.
"""

import cProfile
import os
import platform
import pstats
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import MemberRole, User
from portal.allocations.models import GpuRequest, Purpose, RequestState
from portal.catalog.models import GpuModel, NotebookImage, Offering, SharingBackend
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import gpu_pool_create
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import metering_begin, window_collect
from portal.metering.models import GpuHealth, UsageCapacity, UsageRecord, WorkloadKind
from portal.metering.prometheus import PrometheusGateway, Sample
from portal.metering.services import metrics_source_for
from portal.metering.sources import (
    GpuCapacity,
    MetricsSource,
    PrometheusSource,
    Reading,
    WindowMetrics,
    reading_whole,
    resource_label,
    window_begin,
)
from portal.workloads.models import Notebook, NotebookState
from tenants.models import Membership, Tenant
from tenants.services import tenant_create
from tests.bench.metrics_history import (
    GPUS_PER_NODE,
    HOUR,
    INTERVAL,
    POOLS,
    Fleet,
    Truth,
    fleet_namespaces,
    fleet_plan,
    openmetrics_write,
)

# Imported under another name: pytest would take `bench_scale` for a benchmark.
from tests.bench.scale import bench_scale as scale_configured
from tests.harness.services import _ProcessServer
from tests.metering.history import HistoryPrometheus

TARGET_SECONDS = 5.0
SOURCE_QUERIES = 7  # PrometheusSource: seven queries per window
BATCH = 2000  # window_collect's bulk_create batch size
# The recollection's profile, for `python -m pstats` (or snakeviz).
PROFILE = Path(__file__).resolve().parents[2] / "var" / "bench" / "metering.prof"


class BlocksPrometheus(HistoryPrometheus):
    """tests/metering/history.py's Prometheus, on blocks made from an OpenMetrics file already
    written (its History would hold all the samples in memory)."""

    def __init__(self, source: Path) -> None:
        _ProcessServer.__init__(self)  # not History's: the file is written already
        self.data = self.directory / "data"
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data)],
            check=True,
            capture_output=True,
        )


# The database side of the fleets.


def ledger_create(
    fleet: Fleet, start: datetime, cluster: Cluster, tenants: list[Tenant], users: list[User]
) -> None:
    """The fleet's allocations and notebooks, in bulk; notebook pods take their notebooks'
    names (`nb-<id>-0`)."""
    offerings = {offering.slug: offering for offering in Offering.objects.all()}
    image = NotebookImage.objects.filter(enabled=True).order_by("slug").first()
    assert image is not None

    def allocation(
        tenant: int, slug: str, count: int, span: tuple[int, int], purpose: str
    ) -> GpuRequest:
        offering = offerings[slug]
        begins, ends = start + timedelta(seconds=span[0]), start + timedelta(seconds=span[1])
        request = GpuRequest(
            tenant=tenants[tenant], requester=users[tenant], offering=offering,
            gpu_model_id=offering.gpu_model_id, count=count, state=RequestState.EXPIRED,
            purpose=purpose, duration_hours=max(1, (span[1] - span[0]) // HOUR),
            starts_at=begins, ends_at=ends, decided_at=begins,
            decision_comment="Within the tenant's policy.",
        )  # fmt: skip
        request.gpu_eq = offering.gpu_eq * count
        return request

    pods = [pod for pod in fleet.pods if pod.allocation is not None]
    requests = [
        allocation(
            pod.tenant,
            pod.offering,
            pod.count,
            pod.allocation,
            Purpose.NOTEBOOK if pod.notebook else Purpose.BATCH,
        )
        for pod in pods
        if pod.tenant is not None and pod.allocation is not None
    ]
    requests += [
        allocation(r.tenant, r.offering, r.count, (r.begin, r.end), Purpose.RESERVATION)
        for r in fleet.reservations
    ]
    GpuRequest.objects.bulk_create(requests, batch_size=BATCH)
    launched = [
        (pod, request) for pod, request in zip(pods, requests, strict=False) if pod.notebook
    ]
    notebooks = [
        Notebook(
            tenant_id=request.tenant_id,
            owner_id=request.requester_id,
            allocation=request,
            cluster=cluster,
            name=f"nb-{fleet.tag}-{number}",
            image=image,
            image_reference=image.image,
            cpu_cores=Decimal(pod.cpu),
            memory_gib=pod.memory_gib,
            workspace_gib=20,
            desired="stopped",
            state=NotebookState.STOPPED,
            token=f"{number:032x}",
            running_since=request.starts_at,
            stopped_at=request.ends_at,
        )
        for number, (pod, request) in enumerate(launched)
    ]
    Notebook.objects.bulk_create(notebooks, batch_size=BATCH)
    # A notebook is created when its allocation starts (created_at is set on insert).
    for notebook, (pod, _) in zip(notebooks, launched, strict=True):
        assert pod.allocation is not None
        notebook.created_at = start + timedelta(seconds=pod.allocation[0])
    Notebook.objects.bulk_update(notebooks, ["created_at"], batch_size=BATCH)
    for (pod, _), notebook in zip(launched, notebooks, strict=True):
        pod.name = f"{notebook.kubernetes_name}-0"


def organisation_create(tenants: int) -> tuple[Cluster, list[Tenant], list[User]]:
    """The catalog, the tenants, a user in each, and the cluster with its five pools."""
    catalog_presets_load(actor=None)
    created = [
        tenant_create(actor=None, slug=f"team-{number:04d}", name=f"Team {number:04d}")
        for number in range(tenants)
    ]
    users = User.objects.bulk_create(
        User(username=f"m{number:05d}", email=f"m{number:05d}@example.org", password="!")
        for number in range(tenants)
    )
    Membership.objects.bulk_create(
        Membership(tenant=tenant, user=user, role=MemberRole.DEVELOPER)
        for tenant, user in zip(created, users, strict=True)
    )
    cluster = cluster_create(actor=None, name="bench-metering", metrics_interval_seconds=INTERVAL)
    for pool, _, model, backend, _ in POOLS:
        gpu_pool_create(
            actor=None, cluster=cluster.name, name=pool,
            gpu_model=GpuModel.objects.get(slug=model),
            backend=SharingBackend.objects.get(slug=backend), gpus_per_node=GPUS_PER_NODE,
        )  # fmt: skip
    return cluster, created, users


# Measuring and checking one window.


class TimedSource:
    """A metrics source noting how long the last window took to read (the Prometheus part of a
    collection: its seven queries, answered and parsed, from when they were sent until the last
    answer was read; collection reads the ledger and attributes the usage meanwhile)."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source
        self.seconds = 0.0

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return reading_whole(self.begin(start, resources=resources))

    def begin(self, start: datetime, *, resources: Iterable[str]) -> "TimedReading":
        return TimedReading(self, window_begin(self.source, start, resources=resources))


class TimedReading:
    def __init__(self, source: TimedSource, reading: Reading) -> None:
        self.source, self.reading = source, reading
        self.began = time.perf_counter()

    def usage(self) -> WindowMetrics:
        return self.reading.usage()

    def capacity(self) -> list[GpuCapacity]:
        try:
            return self.reading.capacity()
        finally:
            self.source.seconds = time.perf_counter() - self.began


class RecordingGateway(PrometheusGateway):
    """A gateway keeping each query it was asked, to ask them again one at a time."""

    def __init__(self, *, base_url: str) -> None:
        super().__init__(base_url=base_url, timeout_seconds=60)
        self.asked: list[tuple[str, datetime | None]] = []

    def query(self, promql: str, *, at: datetime | None = None) -> list[Sample]:
        self.asked.append((promql, at))
        return super().query(promql, at=at)


# What each of the source's queries reads, told apart by its text (capacity, which reads
# DCGM_FI_DEV_FB_USED through a subquery, before memory).
QUERY_NAMES = (
    ("kube_pod_container_resource_requests", "requests"),
    ("kube_pod_status_phase", "running"),
    ("DCGM_FI_DEV_GPU_UTIL", "utilisation"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "engine active"),
    ("DCGM_FI_DEV_XID_ERRORS", "XID errors"),
    ("count_over_time((", "capacity (subquery)"),
    ("DCGM_FI_DEV_FB_USED", "GPU memory"),
)


def queries_alone(cluster: Cluster, start: datetime, url: str) -> dict[str, float]:
    """Seconds each of the window's queries takes on its own (answered and parsed), asked one
    after another: which of them Prometheus spends its time on."""
    gateway = RecordingGateway(base_url=url)
    PrometheusSource(gateway, interval_seconds=cluster.metrics_interval_seconds).window(
        start, resources=resource_labels(cluster)
    )
    seconds: dict[str, float] = {}
    for promql, at in list(gateway.asked):
        name = next(name for text, name in QUERY_NAMES if text in promql)
        began = time.perf_counter()
        gateway.query(promql, at=at)
        seconds[name] = round(seconds.get(name, 0) + time.perf_counter() - began, 3)
    return seconds


def resource_labels(cluster: Cluster) -> set[str]:
    """The resources collection asks about (as window_collect does: every offering's)."""
    labels = {"nvidia_com_gpu", "amd_com_gpu"}
    for resources in Offering.objects.values_list("resources", flat=True):
        labels.update(resource_label(name) for name in resources)
    return labels


def window_measure(
    cluster: Cluster, start: datetime, prometheus: BlocksPrometheus
) -> dict[str, Any]:
    """Collect the window at `start`: seconds, Prometheus queries, SQL statements, records."""
    inner = metrics_source_for(cluster)
    assert inner is not None
    source = TimedSource(inner)
    answered = prometheus.queries_answered()
    with CaptureQueriesContext(connection) as sql:
        started = time.perf_counter()
        window = window_collect(cluster, start, source)
        seconds = time.perf_counter() - started
    statements = [query["sql"] for query in sql.captured_queries]
    inserts = sum(text.lstrip().upper().startswith("INSERT") for text in statements)
    return {
        "seconds": round(seconds, 3),
        "metrics_seconds": round(source.seconds, 3),
        "prometheus_queries": prometheus.queries_answered() - answered,
        "source_queries": window.queries,
        "sql_statements": len(statements),
        "sql_inserts": inserts,
        "records": window.records,
    }


def sums(cluster: Cluster, start: datetime) -> dict[str, Any]:
    """The window's records added up: overall, unattributed, notebooks; capacity; XIDs."""
    by_kind = UsageRecord.objects.filter(cluster=cluster, hour=start).measure_sums(
        ("workload_kind",)
    )
    total: dict[str, Any] = {
        name: sum((getattr(m, name) for m in by_kind.values()), start=zero)
        for name, zero in (
            ("reserved", Fraction(0)), ("requested", Fraction(0)),
            ("used_gpu_hours", Decimal(0)), ("memory_gib_hours", Decimal(0)),
            ("cpu_core_hours", Decimal(0)), ("ram_gib_hours", Decimal(0)),
        )
    }  # fmt: skip
    unattributed = by_kind.get((WorkloadKind.UNATTRIBUTED,))
    total["unattributed_used"] = unattributed.used_gpu_hours if unattributed else Decimal(0)
    total["notebook_records"] = UsageRecord.objects.filter(
        cluster=cluster, hour=start, workload_kind=WorkloadKind.NOTEBOOK
    ).count()
    total["capacity"] = {
        row.model_name: row.gpu_hours
        for row in UsageCapacity.objects.filter(cluster=cluster, hour=start)
    }
    total["xid_gpus"] = GpuHealth.objects.filter(cluster=cluster, hour=start).count()
    return total


def problems_of(name: str, got: dict[str, Any], truth: Truth, records: int) -> list[str]:
    """Where the records disagree with what was written: exact measures exactly, the decimal
    ones within the rounding of each record to a millionth."""
    problems = []
    tolerance = Fraction(records + 1, 1_000_000)

    def close(measure: str, expected: Fraction) -> None:
        value = Fraction(got[measure])
        if abs(value - expected) > tolerance:
            problems.append(f"{name}: {measure} {float(value):.6f}, written {float(expected):.6f}")

    problems += [
        f"{name}: {measure} {got[measure]} GPU-eq-h, written {getattr(truth, measure)}"
        for measure in ("reserved", "requested")
        if got[measure] != getattr(truth, measure)
    ]
    for measure in (
        "used_gpu_hours", "memory_gib_hours", "cpu_core_hours", "ram_gib_hours",
        "unattributed_used",
    ):  # fmt: skip
        close(measure, getattr(truth, measure))
    if got["capacity"] != truth.capacity:
        problems.append(f"{name}: capacity {got['capacity']}, written {truth.capacity}")
    if got["notebook_records"] != truth.notebooks:
        problems.append(f"{name}: {got['notebook_records']} notebook records, {truth.notebooks}")
    if got["xid_gpus"] != truth.xid_gpus:
        problems.append(f"{name}: {got['xid_gpus']} GPUs with XIDs, written {truth.xid_gpus}")
    return problems


def profile_lines(profile: cProfile.Profile, total: float) -> list[str]:
    """Where a collection's time went: the steps of window_collect, then the costliest
    functions by their own time. cProfile sees the collecting thread only and counts wall
    time: a step also holds what the query threads' parsing took from it."""
    stats = pstats.Stats(profile)
    steps = {
        "collection.py reserve": "the ledger (while Prometheus answers)",
        "sources.py usage": "Prometheus: the usage answers, parsed",
        "collection.py records": "attribution (Attribution.records)",
        "sources.py capacity": "Prometheus: the capacity answer",
        "collection.py capacity": "capacity rows",
        "bulk_create": "bulk inserts",
        "collection.py daily_rollup": "daily rollup",
    }
    found: dict[str, float] = {}
    own: list[tuple[float, str]] = []
    for (path, line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        _, _, tottime, cumtime, _ = row
        where = f"{Path(path).name}:{line} {function}"
        own.append((tottime, where))
        step = "bulk_create" if function == "bulk_create" else f"{Path(path).name} {function}"
        if step in steps and ("metering" in path or step == "bulk_create"):
            found[step] = found.get(step, 0.0) + cumtime
    lines = [f"profile of the recollection ({total:.2f} s under cProfile):"]
    for step, label in steps.items():
        if step in found:
            lines.append(f"  {label:<42} {found[step]:6.2f} s")
    lines.append("  costliest by own time:")
    for tottime, where in sorted(own, reverse=True)[:8]:
        lines.append(f"    {tottime:6.2f} s  {where}")
    return lines


@pytest.mark.django_db
def bench_metering(bench_report: Any, bench_say: Callable[[str], None]) -> None:
    def say(message: str) -> None:
        bench_say(f"   {time.strftime('%H:%M:%S')} metering: {message}")

    scale = scale_configured()
    gpus = max(100, round(10_000 * scale))
    tenant_count = max(4, round(400 * scale))
    # The window measured, two days back; the tenth two hours before it (an hour apart, so that
    # neither's samples reach into the other's window).
    now = datetime.now(UTC)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(days=2)
    tenth_start = start - timedelta(hours=2)
    setup: dict[str, float] = {}

    began = time.perf_counter()
    cluster, tenants, users = organisation_create(tenant_count)
    fleet = fleet_plan("w", gpus=gpus, tenants=tenant_count)
    tenth = fleet_plan("t", gpus=gpus // 10, tenants=tenant_count)
    namespaces = [cluster.namespace_for(tenant.slug) for tenant in tenants]
    for one, at in ((tenth, tenth_start), (fleet, start)):
        fleet_namespaces(one, namespaces)
        ledger_create(one, at, cluster, tenants, users)
    metering_begin(cluster=cluster, at=tenth_start)
    setup["database (services and bulk inserts)"] = time.perf_counter() - began
    say(
        f"{fleet.gpus} GPUs, {len(fleet.pods)} GPU pods, {len(fleet.cpu_pods)} CPU pods, "
        f"{tenant_count} tenants in {setup['database (services and bulk inserts)']:.1f} s"
    )

    directory = Path(tempfile.mkdtemp(prefix="bench-metering-"))
    prometheus: BlocksPrometheus | None = None
    try:
        source = directory / "history.om"
        began = time.perf_counter()
        tenth_truth, truth = openmetrics_write(source, [(tenth, tenth_start), (fleet, start)])
        setup["OpenMetrics written"] = time.perf_counter() - began
        size = source.stat().st_size
        say(
            f"{tenth_truth.samples:,} samples ({size / 2**30:.2f} GiB) written in "
            f"{setup['OpenMetrics written']:.1f} s"
        )
        began = time.perf_counter()
        prometheus = BlocksPrometheus(source)
        setup["promtool create-blocks"] = time.perf_counter() - began
        source.unlink()
        say(f"promtool made the blocks in {setup['promtool create-blocks']:.1f} s")
        began = time.perf_counter()
        prometheus.start()
        setup["Prometheus start"] = time.perf_counter() - began
        cluster.prometheus_url = prometheus.url
        cluster.save(update_fields=["prometheus_url"])

        small = window_measure(cluster, tenth_start, prometheus)
        say(f"the tenth ({tenth.gpus} GPUs): {small['seconds']:.2f} s")
        problems = problems_of("tenth", sums(cluster, tenth_start), tenth_truth, small["records"])
        whole = window_measure(cluster, start, prometheus)
        say(f"the whole ({fleet.gpus} GPUs): {whole['seconds']:.2f} s")
        first = sums(cluster, start)
        problems += problems_of("whole", first, truth, whole["records"])
        again = window_measure(cluster, start, prometheus)
        say(f"the whole again: {again['seconds']:.2f} s")
        if sums(cluster, start) != first:
            problems.append("whole: collected again, the window's sums changed")

        profile = cProfile.Profile()
        source_again = metrics_source_for(cluster)
        assert source_again is not None
        began = time.perf_counter()
        profile.enable()
        window_collect(cluster, start, source_again)
        profile.disable()
        profiled = time.perf_counter() - began
        PROFILE.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(PROFILE)
        alone = queries_alone(cluster, start, prometheus.url)
    finally:
        if prometheus is not None:
            prometheus.stop()
        shutil.rmtree(directory, ignore_errors=True)

    # The targets.
    # The first window collected also moves the watermark (one more statement), and a window
    # with no XID has no GpuHealth insert: the whole may run fewer statements, never more.
    fixed_sql = (
        whole["sql_statements"] - whole["sql_inserts"]
        <= small["sql_statements"] - small["sql_inserts"]
    )
    targets = [
        (
            f"whole fleet's window <= {TARGET_SECONDS:g} s",
            whole["seconds"] <= TARGET_SECONDS,
            f"{whole['seconds']:.2f} s",
        ),
        (
            f"Prometheus queries fixed (= {SOURCE_QUERIES}, tenth = whole)",
            small["prometheus_queries"] == whole["prometheus_queries"] == SOURCE_QUERIES
            and whole["source_queries"] == SOURCE_QUERIES,
            f"{small['prometheus_queries']} / {whole['prometheus_queries']}",
        ),
        (
            "SQL statements fixed but for insert batches (tenth >= whole)",
            fixed_sql,
            (
                f"{small['sql_statements']} ({small['sql_inserts']} inserts) / "
                f"{whole['sql_statements']} ({whole['sql_inserts']} inserts)"
            ),
        ),
    ]
    met = sum(ok for _, ok, _ in targets)
    summary = f"{met}/{len(targets)} targets met (metering)"
    hours = Decimal(first["used_gpu_hours"]).quantize(Decimal("0.01"))
    lines = [
        (
            f"machine: {platform.node()}, {os.cpu_count()} cores, load "
            f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}; BENCH_SCALE={scale:g}"
        ),
        (
            f"fleet: {fleet.gpus} GPUs ({len(fleet.devices)} devices with MIG instances), "
            f"{len(fleet.pods)} GPU pods, {len(fleet.cpu_pods)} CPU-only pods, "
            f"{tenant_count} tenants; scrape interval {INTERVAL} s"
        ),
        (
            f"Prometheus: {tenth_truth.samples:,} samples for both windows, "
            f"{size / 2**30:.2f} GiB of OpenMetrics"
        ),
        "setup: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in setup.items()),
        "",
        (
            f"{'window':<16} {'GPUs':>6} {'seconds':>8} {'of which metrics':>17} {'PromQL':>7} "
            f"{'SQL (inserts)':>14} {'records':>8}"
        ),
    ]
    for name, gpu_count, row in (
        ("a tenth", tenth.gpus, small),
        ("whole", fleet.gpus, whole),
        ("whole, again", fleet.gpus, again),
    ):
        lines.append(
            f"{name:<16} {gpu_count:>6} {row['seconds']:>8.2f} {row['metrics_seconds']:>17.2f} "
            f"{row['prometheus_queries']:>7} {row['sql_statements']:>6} ({row['sql_inserts']:>3})"
            f"  {row['records']:>8}"
        )
    lines.append(
        "(metrics: from the seven queries sent at once to the last answer parsed, the ledger "
        "read and the usage attributed meanwhile; the records go in by one COPY, which "
        "Django's statement log does not show)"
    )
    lines += [
        f"whole: reserved {float(first['reserved']):.2f} GPU-eq-h, requested "
        f"{float(first['requested']):.2f} GPU-eq-h, used {hours} GPU-h, capacity "
        f"{float(sum(first['capacity'].values(), Fraction(0))):.0f} GPU-h: "
        + ("as written" if not problems else f"{len(problems)} differences"),
        "",
        *profile_lines(profile, profiled),
        (
            f"Prometheus, each query alone ({sum(alone.values()):.2f} s in all): "
            + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in alone.items())
        ),
        "",
    ]
    lines += [f"{'met ' if ok else 'MISSED'} {name}: {figure}" for name, ok, figure in targets]
    lines.append(summary)
    report = {
        "machine": {
            "node": platform.node(),
            "cores": os.cpu_count(),
            "load": os.getloadavg(),
        },
        "scale": scale,
        "gpus": fleet.gpus,
        "tenth_gpus": tenth.gpus,
        "gpu_pods": len(fleet.pods),
        "cpu_pods": len(fleet.cpu_pods),
        "tenants": tenant_count,
        "scrape_interval_seconds": INTERVAL,
        "samples": tenth_truth.samples,
        "openmetrics_bytes": size,
        "setup_seconds": {name: round(seconds, 2) for name, seconds in setup.items()},
        "tenth": small,
        "whole": whole,
        "whole_again": again,
        "recollection_profiled_seconds": round(profiled, 3),
        "prometheus_queries_alone_seconds": alone,
        "whole_sums": {
            key: str(value)
            if not isinstance(value, dict)
            else {k: str(v) for k, v in value.items()}
            for key, value in first.items()
        },
        "problems": problems,
        "targets": {name: {"met": ok, "figure": figure} for name, ok, figure in targets},
        "summary": summary,
    }
    bench_report("metering", report, lines=lines, closing=summary)
    assert not problems, "\n".join(problems[:20])
