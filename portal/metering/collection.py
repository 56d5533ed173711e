"""Collection: close one cluster's hourly windows into usage records, in order, exactly once.

A window is collected in three steps. (1) Its fill state becomes `started` (committed). (2) The
metrics source is read, outside any transaction: a fixed number of Prometheus queries. (3) In one
transaction, under a lock on the window's row, the window's old rows are deleted, the new ones
written in one bulk insert, the day's rollup rewritten, the window marked `done` and the
watermark moved. So a window interrupted after (1) is simply redone, one collected twice ends
with the same rows, and two workers on one window write one after the other.

A window whose metrics cannot be read is marked `failed` with the reason and stops the run: the
next run (the periodic task) starts again from it, so windows are always completed in order and
the watermark never passes a hole.

Attribution (README, "Usage metering"):
- reserved GPU-eq-hours come from the allocation ledger: each allocation's [starts_at, ends_at)
  to the second, times its GPU-eq; it counts on the cluster its notebook runs on, or else the
  first cluster with a pool of its model and backend;
- a pod in a tenant's namespace belongs to the tenant; a notebook's pod (`nb-<id>-0`) to the
  notebook, its owner and its allocation's offering; other pods to no user, with the offering
  whose extended resources they ask for;
- requested GPU-eq-hours are the pod's requests in units of its offering x the offering's
  GPU-eq x the time the pod ran (samples in phase Running x the scrape interval);
- CPU core-hours and memory (RAM) GiB-hours are the CPU and memory requests of a pod that asks
  for a GPU, summed over its containers, x the time it ran, with the pod's key: pods that hold
  no GPU are not metered (rate cards are per GPU model; they have none), and an allocation
  with no pod has none;
- used GPU-hours are the device's busy time x its GPU-eq (a MIG instance `3g.40gb` is 3/7 of a
  GPU); a device several pods share is split among them by their requested GPU-eq (equally
  when unknown); memory GiB-hours likewise;
- what the portal cannot attribute (a namespace it does not manage, a busy GPU without a pod)
  is kept per namespace as `unattributed`, never dropped.
"""

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Case, DateField, F, Q, Sum, Value, When
from django.utils import timezone

from portal.allocations.models import GpuRequest
from portal.catalog.gpu_eq import gpu_eq_parse
from portal.catalog.models import GpuModel, GpuPool, Offering
from portal.cluster.models import Cluster
from portal.core.bulk import rows_insert, rows_insert_select
from portal.core.validators import BIGINT_MAX
from portal.metering.models import (
    COMMON_DENOMINATOR,
    MICRO,
    GpuHealth,
    Measures,
    MeteringState,
    UsageCapacity,
    UsageDaily,
    UsageModelDaily,
    UsageModelMonthly,
    UsageMonthly,
    UsageRecord,
    UsageWindow,
    UsageWorkloadDaily,
    WindowState,
    WorkloadKind,
)
from portal.metering.sources import (
    COMPUTE_RESOURCES,
    CPU,
    MEMORY,
    WINDOW,
    DeviceUse,
    MetricsSource,
    MetricsUnavailable,
    WindowMetrics,
    resource_label,
    window_begin,
)
from portal.workloads.models import Notebook
from tenants.models import Tenant

logger = logging.getLogger(__name__)

NOTEBOOK_POD = re.compile(r"^nb-(\d+)-0$")
MIG_PROFILE = re.compile(r"(?:^|\.)(\d+)g\.")
HOUR_SECONDS = 3600
GIB = 2**30


def hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


# The watermark and the windows due


def metering_state(cluster: Cluster) -> MeteringState:
    """The cluster's metering state; metering begins at the hour the cluster was added."""
    state, _ = MeteringState.objects.get_or_create(
        cluster=cluster, defaults={"begins_at": hour_floor(cluster.created_at)}
    )
    return state


def metering_begin(*, cluster: Cluster, at: datetime, demo: bool = False) -> MeteringState:
    """Meter `cluster` from the hour of `at` (earlier history is caught up in order)."""
    state = metering_state(cluster)
    state.begins_at = hour_floor(at)
    state.demo = demo
    # The watermark is found again from the new beginning: earlier hours are collected, and
    # windows already done are stepped over once the hours before them are.
    state.complete_until = None
    state.save(update_fields=["begins_at", "demo", "complete_until"])
    return state


def windows_due(cluster: Cluster, *, now: datetime | None = None) -> list[datetime]:
    """The starts of the windows to collect, oldest first: from the watermark up to the last
    hour that ended `PORTAL_METERING_DELAY_SECONDS` ago (the last scrapes have landed)."""
    state = metering_state(cluster)
    first = state.complete_until or state.begins_at
    now = now or timezone.now()
    last_end = hour_floor(now - timedelta(seconds=settings.PORTAL_METERING_DELAY_SECONDS))
    starts = []
    start = first
    while start + WINDOW <= last_end:
        starts.append(start)
        start += WINDOW
    return starts


@dataclass
class MeterResult:
    collected: list[datetime] = field(default_factory=list)
    failed: datetime | None = None
    error: str = ""


def meter_cluster(
    cluster: Cluster,
    source: MetricsSource,
    *,
    now: datetime | None = None,
    limit: int | None = None,
) -> MeterResult:
    """Collect the cluster's due windows in order, at most `limit`; stop at the first failure."""
    result = MeterResult()
    starts = windows_due(cluster, now=now)
    for start in starts[:limit] if limit else starts:
        try:
            window_collect(cluster, start, source)
        except MetricsUnavailable as error:
            result.failed, result.error = start, str(error)
            break
        result.collected.append(start)
    MeteringState.objects.filter(cluster=cluster).update(
        last_run_at=timezone.now(), last_error=result.error
    )
    return result


# One window


def window_collect(cluster: Cluster, start: datetime, source: MetricsSource) -> UsageWindow:
    """Collect the window starting at `start` (again, if it was): see the module docstring."""
    start = hour_floor(start)
    metering_state(cluster)
    with transaction.atomic():
        window, _ = UsageWindow.objects.select_for_update().get_or_create(
            cluster=cluster, start=start, defaults={"state": WindowState.STARTED}
        )
        window.state = WindowState.STARTED
        window.attempts += 1
        window.started_at = timezone.now()
        window.error = ""
        window.save()
    attribution = Attribution(cluster, start)
    try:
        reading = window_begin(source, start, resources=_resource_labels(cluster))
        # Each step goes on while Prometheus still answers what the next one needs: the
        # ledger needs no metrics, and the records no capacity (its query is the slowest).
        attribution.reserve()
        metrics = reading.usage()
        records = attribution.records(metrics)
        metrics.capacity = reading.capacity()
    except MetricsUnavailable as error:
        UsageWindow.objects.filter(pk=window.pk).update(
            state=WindowState.FAILED, error=str(error)[:2000], finished_at=timezone.now()
        )
        logger.warning("metering %s %s failed: %s", cluster.name, start.isoformat(), error)
        raise
    capacity = attribution.capacity(metrics)
    with transaction.atomic():
        # One writer per cluster at a time: the day's rollup is summed from every hour of the
        # day, which another window's uncommitted rows would leave out.
        MeteringState.objects.select_for_update().get(cluster=cluster)
        window = UsageWindow.objects.select_for_update().get(pk=window.pk)
        UsageRecord.objects.filter(cluster=cluster, hour=start).delete()
        GpuHealth.objects.filter(cluster=cluster, hour=start).delete()
        UsageCapacity.objects.filter(cluster=cluster, hour=start).delete()
        records_insert(records)
        UsageCapacity.objects.bulk_create(capacity)
        GpuHealth.objects.bulk_create(
            GpuHealth(
                cluster=cluster,
                hour=start,
                node=xid.node[:253],
                gpu_uuid=xid.gpu_uuid[:100],
                model_name=xid.model_name[:100],
                last_xid=xid.last_xid,
            )
            for xid in metrics.xids
        )
        daily_rollup(cluster, start.date())
        window.state = WindowState.DONE
        window.queries = metrics.queries
        window.records = len(records)
        window.finished_at = timezone.now()
        window.save()
        _window_counted(cluster)
    return window


class RecordRow(NamedTuple):
    """One usage record's column values (UsageRecord's attribute names): collection writes a
    window's records as rows, not model instances, which cost more than the rest of a
    record's making."""

    cluster_id: int
    hour: datetime
    tenant_id: int | None
    namespace: str
    user_id: int | None
    workload_kind: str
    workload: str
    notebook_id: int | None
    allocation_id: int | None
    gpu_model_id: int | None
    offering_id: int | None
    reserved_num: int
    reserved_den: int
    requested_num: int
    requested_den: int
    used_gpu_hours: Decimal
    memory_gib_hours: Decimal
    cpu_core_hours: Decimal
    ram_gib_hours: Decimal


def records_insert(records: list[RecordRow]) -> None:
    """Insert a window's records: on PostgreSQL in one COPY (`rows_insert`). A window of
    10,000 GPUs has some 20,000 records, which bulk_create takes about 2 s to turn into SQL
    parameters while COPY takes their values as they are."""
    if records:
        rows_insert(UsageRecord, RecordRow._fields, records)


def _window_counted(cluster: Cluster) -> None:
    """Count the window just done (`windows_done`, which kept usage readings are keyed by) and
    move the watermark over every consecutive done window."""
    state = MeteringState.objects.select_for_update().get(cluster=cluster)
    until = state.complete_until or state.begins_at
    done = set(
        UsageWindow.objects.filter(
            cluster=cluster, state=WindowState.DONE, start__gte=until
        ).values_list("start", flat=True)
    )
    while until in done:
        until += WINDOW
    if until != (state.complete_until or state.begins_at):
        state.complete_until = until
    state.windows_done += 1
    state.save(update_fields=["complete_until", "windows_done"])


def _resource_labels(cluster: Cluster) -> set[str]:
    """The extended resources of every offering, as kube-state-metrics labels them, and whole
    GPUs of either vendor even before the catalog names them."""
    names: set[str] = {"nvidia_com_gpu", "amd_com_gpu"}
    for resources in Offering.objects.values_list("resources", flat=True):
        names.update(resource_label(name) for name in resources)
    return names


# The rollup writes its GPU-eq-hours over COMMON_DENOMINATOR (metering's models): each
# reader then adds a set of rows up in one SQL group. A total this cannot express exactly keeps
# its lowest terms; either way the value is exact.


def _over_rollup_denominator(amount: Fraction) -> tuple[int, int]:
    """`amount`, checked as every stored GPU-eq is (`gpu_eq_parse`), as (numerator,
    denominator) over COMMON_DENOMINATOR when it is exact there and fits the column."""
    amount = gpu_eq_parse(amount)
    scaled = amount * COMMON_DENOMINATOR
    if scaled.denominator == 1 and scaled.numerator <= BIGINT_MAX:
        return scaled.numerator, COMMON_DENOMINATOR
    return amount.numerator, amount.denominator


# The columns of a rollup row: where (the grouping's columns) and the measures after them.
MODEL_WHERE = ("tenant_id", "namespace", "gpu_model_id")
ROLLUP_WHERE = (*MODEL_WHERE, "offering_id")
WORKLOAD_WHERE = (*ROLLUP_WHERE, "user_id", "workload_kind", "workload")
MEASURE_COLUMNS = (
    "reserved_num",
    "reserved_den",
    "requested_num",
    "requested_den",
    "used_gpu_hours",
    "memory_gib_hours",
    "cpu_core_hours",
    "ram_gib_hours",
)


def daily_rollup(cluster: Cluster, day: date) -> None:
    """Rewrite the day's rollup rows of `cluster` from its hourly records: one grouped query
    per workload (`UsageWorkloadDaily`), added up here per namespace, GPU model and offering
    (`UsageDaily`), and again per namespace and GPU model (`UsageModelDaily`). GPU-eq-hours
    are written over COMMON_DENOMINATOR where they can be. The rows are written by
    `rows_insert` (one COPY each on PostgreSQL): a day of 10,000 GPUs has some 20,000
    workloads, rewritten with each hourly window. The day's month is then rolled up again
    (`monthly_rollup`)."""
    begin = datetime.combine(day, time(), tzinfo=UTC)
    hours = UsageRecord.objects.filter(
        cluster=cluster, hour__gte=begin, hour__lt=begin + timedelta(days=1)
    )
    per_workload = hours.measure_sums(WORKLOAD_WHERE)
    sums = _added_up(per_workload, len(ROLLUP_WHERE))
    per_model = _added_up(sums, len(MODEL_WHERE))
    for model in (UsageWorkloadDaily, UsageDaily, UsageModelDaily):
        model.objects.filter(cluster=cluster, day=day).delete()
    for model, where, totals in (
        (UsageWorkloadDaily, WORKLOAD_WHERE, per_workload),
        (UsageDaily, ROLLUP_WHERE, sums),
        (UsageModelDaily, MODEL_WHERE, per_model),
    ):
        rows_insert(
            model,
            ("cluster_id", "day", *where, *MEASURE_COLUMNS),
            ((cluster.pk, day, *key, *_measure_values(total)) for key, total in totals.items()),
        )
    monthly_rollup(cluster, day.replace(day=1))


def _added_up(sums: dict[tuple[Any, ...], Measures], width: int) -> dict[tuple[Any, ...], Measures]:
    """`sums` added up per the first `width` values of their keys."""
    fewer: dict[tuple[Any, ...], Measures] = {}
    for key, measures in sums.items():
        fewer.setdefault(key[:width], Measures()).add(measures)
    return fewer


# The largest daily numerator 31 of which surely add up within a bigint.
MONTH_SUMMABLE = BIGINT_MAX // 31


def monthly_rollup(cluster: Cluster, month: date) -> None:
    """Rewrite `cluster`'s monthly rollup rows of `month` (its first day) from the month's
    daily rollup, in the database (`INSERT … SELECT`), by offering (`UsageMonthly`) and by
    GPU model (`UsageModelMonthly`): a row per key and denominator, the numerators summed
    over the same denominator (exact; the daily rows are over COMMON_DENOMINATOR wherever
    that holds them). A month of a cluster of 10,000 GPUs is some 55,000 daily rows into
    12,000 monthly ones. A day whose numerator is so large that 31 of them might not fit a
    bigint keeps a monthly row of its own (`apart`)."""
    for daily, monthly, where in (
        (UsageDaily, UsageMonthly, ROLLUP_WHERE),
        (UsageModelDaily, UsageModelMonthly, MODEL_WHERE),
    ):
        _month_added_up(cluster, month, daily, monthly, where)


def _month_added_up(
    cluster: Cluster,
    month: date,
    daily: type[UsageDaily | UsageModelDaily],
    monthly: type[UsageMonthly | UsageModelMonthly],
    where: Sequence[str],
) -> None:
    following = (month + timedelta(days=31)).replace(day=1)
    large = Q(reserved_num__gt=MONTH_SUMMABLE) | Q(requested_num__gt=MONTH_SUMMABLE)
    days = (
        daily.objects.filter(cluster=cluster, day__gte=month, day__lt=following)
        .order_by()
        .values(
            *where,
            "reserved_den",
            "requested_den",
            apart=Case(When(large, then=F("day")), default=None, output_field=DateField()),
        )
        .annotate(
            in_cluster=Value(cluster.pk),
            in_month=Value(month),
            reserved=Sum("reserved_num"),
            requested=Sum("requested_num"),
            used=Sum("used_gpu_hours"),
            memory=Sum("memory_gib_hours"),
            cpu=Sum("cpu_core_hours"),
            ram=Sum("ram_gib_hours"),
        )
        .values_list(
            "in_cluster",
            "in_month",
            *where,
            "reserved",
            "reserved_den",
            "requested",
            "requested_den",
            "used",
            "memory",
            "cpu",
            "ram",
        )
    )
    monthly.objects.filter(cluster=cluster, month=month).delete()
    rows_insert_select(monthly, ("cluster_id", "month", *where, *MEASURE_COLUMNS), days)


def _measure_values(total: Measures) -> tuple[Any, ...]:
    """`total` as the values of MEASURE_COLUMNS."""
    return (
        *_over_rollup_denominator(total.reserved),
        *_over_rollup_denominator(total.requested),
        total.used_gpu_hours,
        total.memory_gib_hours,
        total.cpu_core_hours,
        total.ram_gib_hours,
    )


# Attribution: metrics and the ledger to records


@dataclass(frozen=True)
class Key:
    tenant_id: int | None
    namespace: str
    user_id: int | None
    kind: str
    workload: str
    notebook_id: int | None = None
    allocation_id: int | None = None
    gpu_model_id: int | None = None
    offering_id: int | None = None


class _Launched(NamedTuple):
    """The notebook an allocation's hours go to."""

    pk: int
    cluster_id: int
    owner_id: int
    name: str


def _seconds(moment: datetime) -> int:
    return int(moment.timestamp())


def offering_units(offering: Offering, requests: dict[str, Decimal]) -> Fraction:
    """How many units of `offering` a pod asking for `requests` (resource label → amount)
    holds: the largest ratio over the offering's resources."""
    units = Fraction(0)
    for name, quantity in offering.resources.items():
        amount = requests.get(resource_label(name))
        per_unit = Fraction(str(quantity)) if str(quantity).replace(".", "", 1).isdigit() else 0
        if amount is not None and per_unit:
            units = max(units, Fraction(amount) / per_unit)
    return units


class Attribution:
    """Turns one window's metrics and the ledger into usage records for one cluster."""

    def __init__(self, cluster: Cluster, start: datetime) -> None:
        self.cluster = cluster
        self.start = start
        self.end = start + WINDOW
        self.totals: dict[Key, Measures] = defaultdict(Measures)
        tenants = Tenant.objects.only("id", "slug")
        self.tenants = {cluster.namespace_for(tenant.slug): tenant.pk for tenant in tenants}
        pools = GpuPool.objects.filter(cluster=cluster.name).values_list(
            "gpu_model_id", "backend_id"
        )
        served = Q(pk__in=[])
        for model_id, backend_id in pools:
            served |= Q(gpu_model_id=model_id, backend_id=backend_id)
        self.offerings_by_resources: dict[frozenset[str], list[Offering]] = defaultdict(list)
        for offering in Offering.objects.filter(served).order_by("-whole", "id"):
            labels = frozenset(resource_label(name) for name in offering.resources)
            self.offerings_by_resources[labels].append(offering)
        self.models_by_device_name = {
            model.node_label_value.replace("-", " ").lower(): model.pk
            for model in GpuModel.objects.only("id", "node_label_value")
        }

    def records(self, metrics: WindowMetrics) -> list[RecordRow]:
        """The window's records: the reserved hours `reserve` added up (call it first), and
        what the metrics say was requested and used."""
        requested = self._requested(metrics)
        self._used(metrics, requested)
        records = []
        for key, measures in self.totals.items():
            reserved = gpu_eq_parse(measures.reserved)  # bounded to the columns
            asked = gpu_eq_parse(measures.requested)
            records.append(
                RecordRow(
                    cluster_id=self.cluster.pk,
                    hour=self.start,
                    tenant_id=key.tenant_id,
                    namespace=key.namespace[:63],
                    user_id=key.user_id,
                    workload_kind=key.kind,
                    workload=key.workload[:253],
                    notebook_id=key.notebook_id,
                    allocation_id=key.allocation_id,
                    gpu_model_id=key.gpu_model_id,
                    offering_id=key.offering_id,
                    reserved_num=reserved.numerator,
                    reserved_den=reserved.denominator,
                    requested_num=asked.numerator,
                    requested_den=asked.denominator,
                    used_gpu_hours=measures.used_gpu_hours.quantize(MICRO),
                    memory_gib_hours=measures.memory_gib_hours.quantize(MICRO),
                    cpu_core_hours=measures.cpu_core_hours.quantize(MICRO),
                    ram_gib_hours=measures.ram_gib_hours.quantize(MICRO),
                )
            )
        return records

    def capacity(self, metrics: WindowMetrics) -> list[UsageCapacity]:
        """The window's GPU-hours per model, mapped to the catalog's models as usage is."""
        hours: dict[str, Fraction] = defaultdict(Fraction)
        for present in metrics.capacity:
            hours[present.model_name[:100]] += present.gpu_hours
        rows = []
        for model_name, gpu_hours in sorted(hours.items()):
            row = UsageCapacity(
                cluster=self.cluster,
                hour=self.start,
                gpu_model_id=self._model_id(model_name),
                model_name=model_name,
            )
            row.gpu_hours = gpu_hours
            rows.append(row)
        return rows

    def _model_id(self, device_name: str) -> int | None:
        """The catalog's model of the DCGM exporter's `modelName` ("NVIDIA A100-SXM4-80GB" is
        the model whose node label is NVIDIA-A100-SXM4-80GB)."""
        return self.models_by_device_name.get(device_name.replace("-", " ").lower())

    # reserved, from the ledger

    def reserve(self) -> None:
        """Add up the reserved GPU-eq-hours of the window, from the ledger alone. Plain
        values, not model instances: a window of a large cluster has tens of thousands of
        allocations."""
        allocations = list(
            GpuRequest.objects.filter(
                starts_at__lt=self.end, ends_at__gt=self.start, starts_at__isnull=False
            ).values_list(
                "pk", "tenant_id", "tenant__slug", "requester_id", "gpu_model_id",
                "offering_id", "offering__backend_id", "starts_at", "ends_at",
                "gpu_eq_num", "gpu_eq_den",
            )
        )  # fmt: skip
        if not allocations:
            return
        # The latest notebook launched on each allocation before the window ended: a notebook
        # launched later does not take earlier hours (nor move them to its cluster).
        notebooks: dict[int, _Launched] = {}
        for allocation_id, notebook_id, cluster_id, owner_id, name in (
            Notebook.objects.filter(
                allocation_id__in=[row[0] for row in allocations], created_at__lt=self.end
            )
            .order_by("created_at", "id")
            .values_list("allocation_id", "pk", "cluster_id", "owner_id", "name")
        ):
            notebooks[allocation_id] = _Launched(notebook_id, cluster_id, owner_id, name)
        clusters = self._clusters_serving()
        window_first, window_end = _seconds(self.start), _seconds(self.end)
        for (
            pk, tenant_id, slug, requester_id, model_id, offering_id, backend_id,
            starts_at, ends_at, eq_num, eq_den,
        ) in allocations:  # fmt: skip
            launched = notebooks.get(pk)
            cluster_id = (
                launched.cluster_id
                if launched is not None
                else clusters.get((model_id, backend_id), clusters[None])
            )
            if cluster_id != self.cluster.pk:
                continue
            if starts_at is None or ends_at is None:
                continue  # never approved: holds nothing
            begin = max(_seconds(starts_at), window_first)
            end = min(_seconds(ends_at), window_end)
            if end <= begin:
                continue
            key = Key(
                tenant_id=tenant_id,
                namespace=self.cluster.namespace_for(slug),
                user_id=launched.owner_id if launched else requester_id,
                kind=WorkloadKind.NOTEBOOK if launched else WorkloadKind.ALLOCATION,
                workload=launched.name if launched else f"allocation-{pk}",
                notebook_id=launched.pk if launched else None,
                allocation_id=pk,
                gpu_model_id=model_id,
                offering_id=offering_id,
            )
            self.totals[key].reserved += Fraction(end - begin, HOUR_SECONDS) * Fraction(
                eq_num, eq_den
            )

    def _clusters_serving(self) -> dict[Any, int]:
        """(model id, backend id) → the first enabled cluster with such a pool; None → the
        first cluster, where allocations no pool serves are counted."""
        clusters = dict(
            Cluster.objects.filter(enabled=True).order_by("id").values_list("name", "id")
        )
        serving: dict[Any, int] = {}
        for name, model_id, backend_id in GpuPool.objects.order_by("id").values_list(
            "cluster", "gpu_model_id", "backend_id"
        ):
            if name in clusters:
                serving.setdefault((model_id, backend_id), clusters[name])
        first = Cluster.objects.order_by("id").values_list("id", flat=True).first()
        serving[None] = first if first is not None else self.cluster.pk
        return serving

    # requested, from kube-state-metrics

    def _pod_keys(self, pods: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Key]:
        """Who each (namespace, pod) belongs to, without its model and offering yet."""
        notebook_ids = {
            int(match.group(1)) for _, pod in pods if (match := NOTEBOOK_POD.match(pod))
        }
        notebooks = {
            row[0]: row
            for row in Notebook.objects.filter(pk__in=notebook_ids, cluster=self.cluster)
            .values_list(
                "pk", "tenant_id", "owner_id", "name", "allocation_id",
                "allocation__gpu_model_id", "allocation__offering_id",
            )
            .iterator(chunk_size=5000)
        }  # fmt: skip
        keys = {}
        for namespace, pod in pods:
            tenant_id = self.tenants.get(namespace)
            match = NOTEBOOK_POD.match(pod)
            notebook = notebooks.get(int(match.group(1))) if match else None
            if tenant_id is None or not pod:
                keys[(namespace, pod)] = Key(None, namespace, None, WorkloadKind.UNATTRIBUTED, "")
            elif notebook is not None and notebook[1] == tenant_id:
                notebook_id, _, owner_id, name, allocation_id, model_id, offering_id = notebook
                keys[(namespace, pod)] = Key(
                    tenant_id=tenant_id,
                    namespace=namespace,
                    user_id=owner_id,
                    kind=WorkloadKind.NOTEBOOK,
                    workload=name,
                    notebook_id=notebook_id,
                    allocation_id=allocation_id,
                    gpu_model_id=model_id,
                    offering_id=offering_id,
                )
            else:
                keys[(namespace, pod)] = Key(tenant_id, namespace, None, WorkloadKind.POD, pod)
        return keys

    def _requested(self, metrics: WindowMetrics) -> dict[tuple[str, str], tuple[Key, Fraction]]:
        """Each pod's key and GPU-eq held; adds requested GPU-eq-hours to the totals."""
        asks: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(dict)
        for request in metrics.requests:
            asks[(request.namespace, request.pod)][request.resource] = request.amount
        running = {(run.namespace, run.pod): run.seconds for run in metrics.running}
        pods = set(asks) | {(d.namespace, d.pod) for d in metrics.devices}
        self.pod_keys = self._pod_keys(pods)
        offerings = {
            o.pk: o
            for o in Offering.objects.filter(
                pk__in={k.offering_id for k in self.pod_keys.values() if k.offering_id}
            )
        }
        # The model the DCGM exporter saw a pod's GPU to be: it settles which model a resource
        # several models share (nvidia.com/gpu) means, for requested and used hours alike.
        seen: dict[tuple[str, str], int] = {}
        for use in metrics.devices:
            model_id = self._model_id(use.model_name)
            if model_id is not None:
                seen.setdefault((use.namespace, use.pod), model_id)
        held: dict[tuple[str, str], tuple[Key, Fraction]] = {}
        for pod, asked in asks.items():
            resources = {n: a for n, a in asked.items() if n not in COMPUTE_RESOURCES}
            if not resources:
                continue  # no GPU: not metered (its CPU and memory included)
            key = self.pod_keys[pod]
            offering = offerings.get(key.offering_id) if key.offering_id else None
            if offering is None:
                candidates = self.offerings_by_resources.get(frozenset(resources), [])
                of_model = [c for c in candidates if c.gpu_model_id == seen.get(pod)]
                candidates = of_model or candidates
                models = {candidate.gpu_model_id for candidate in candidates}
                offering = candidates[0] if candidates else None
                key = Key(
                    **{
                        **key.__dict__,
                        "gpu_model_id": (
                            offering.gpu_model_id
                            if offering is not None and len(models) == 1
                            else seen.get(pod)
                        ),
                        "offering_id": candidates[0].pk if len(candidates) == 1 else None,
                    }
                )
            gpu_eq = (
                offering_units(offering, resources) * offering.gpu_eq
                if offering
                else (
                    Fraction(
                        sum(
                            amount
                            for name, amount in resources.items()
                            if name.endswith("_com_gpu")
                        )
                    )
                )
            )
            held[pod] = (key, gpu_eq)
            seconds = running.get(pod, 0)
            if seconds:
                measures = self.totals[key]
                measures.requested += Fraction(seconds, HOUR_SECONDS) * gpu_eq
                cpu, ram = asked.get(CPU, Decimal(0)), asked.get(MEMORY, Decimal(0))
                measures.cpu_core_hours += cpu * seconds / HOUR_SECONDS
                measures.ram_gib_hours += ram * seconds / GIB / HOUR_SECONDS
        return held

    # used, from the DCGM exporter

    def _used(
        self, metrics: WindowMetrics, held: dict[tuple[str, str], tuple[Key, Fraction]]
    ) -> None:
        by_device = defaultdict(list)
        for use in metrics.devices:
            if not use.pod and not use.busy_seconds:
                continue  # an idle GPU no pod holds: nobody's usage
            by_device[(use.node, use.device)].append(use)
        mig_devices: dict[tuple[str, str], int] = defaultdict(int)
        for uses in by_device.values():
            for use in uses:
                if use.mig_profile:
                    mig_devices[(use.namespace, use.pod)] += 1
        for uses in by_device.values():
            shares = self._shares(uses, held)
            for use in uses:
                pod = (use.namespace, use.pod)
                key = held[pod][0] if pod in held else self.pod_keys[pod]
                if key.gpu_model_id is None:
                    model_id = self._model_id(use.model_name)
                    key = Key(**{**key.__dict__, "gpu_model_id": model_id})
                measures = self.totals[key]
                share = shares.get(pod, Decimal(1))
                size = self._device_size(use, held.get(pod), mig_devices.get(pod, 1))
                measures.used_gpu_hours += use.busy_seconds * share * size / HOUR_SECONDS
                measures.memory_gib_hours += use.memory_mib_seconds * share / 1024 / HOUR_SECONDS

    @staticmethod
    def _shares(
        uses: list[DeviceUse], held: dict[tuple[str, str], tuple[Key, Fraction]]
    ) -> dict[tuple[str, str], Decimal]:
        """How a device's time is split between the pods on it. A whole GPU or a MIG instance is
        exclusive: pods on it took turns, each gets its own series whole. A shared device
        (pods holding a fraction of a whole GPU: time-slicing, memory slices) reports its
        numbers to every pod on it, so they are split by the pods' shares."""
        pods = [(u.namespace, u.pod) for u in uses if u.pod]
        fractions = [held[pod][1] for pod in pods if pod in held]
        shared = not uses[0].mig_profile and any(f.denominator != 1 for f in fractions)
        if not shared or len(pods) < 2:
            return {}
        weights = {
            pod: (
                Decimal(held[pod][1].numerator) / Decimal(held[pod][1].denominator)
                if pod in held and held[pod][1]
                else Decimal(1)
            )
            for pod in pods
        }
        whole = sum(weights.values())
        return {pod: weight / whole for pod, weight in weights.items()}

    @staticmethod
    def _device_size(use: DeviceUse, pod: tuple[Key, Fraction] | None, instances: int) -> Decimal:
        """How much of a GPU the device is: 1, or for a MIG instance what the pod holds (its
        offering's GPU-eq) over the instances it holds, else the profile's compute slices out
        of 7."""
        if not use.mig_profile:
            return Decimal(1)
        if pod is not None and pod[1]:
            return Decimal(pod[1].numerator) / Decimal(pod[1].denominator) / instances
        slices = MIG_PROFILE.search(use.mig_profile)
        return Decimal(int(slices.group(1))) / 7 if slices else Decimal(1)
