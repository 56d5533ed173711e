"""Usage records: what each tenant, user and workload reserved, requested and used, per hour.

Every later number (chargeback, budgets, idle waste) reads these. Collection (collection.py)
closes one hourly window per cluster at a time; each window has a fill state, as Zulip's
analytics `FillState` has: `started` while rows are written, `done` once they all are, `failed`
with Prometheus's reason when it could not be read. A window found `started` was interrupted:
its rows are deleted and it is done again. `MeteringState.complete_until` is the watermark:
usage of the cluster is complete up to then.

Measures (DOMAIN.md, "Usage record"):
- `reserved`: GPU-eq-hours from the allocation ledger, an exact fraction;
- `requested`: GPU-eq-hours pods held (kube-state-metrics), an exact fraction;
- `used_gpu_hours`: GPU-hours of busy GPU (DCGM exporter), and `memory_gib_hours`: GPU memory
  in use (GiB-hours). These come from sampled utilisation: Decimal, to the microhour;
- `cpu_core_hours` and `ram_gib_hours`: the CPU cores and memory (RAM, GiB) the pods that hold
  a GPU requested (kube-state-metrics), times the time they ran: Decimal, to the microhour.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar

from django.conf import settings
from django.db import connections, models
from django.db.models import BigIntegerField, Case, F, Q, Sum, Value, When
from django.db.models.functions import Mod
from django.db.models.lookups import Exact
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.catalog.gpu_eq import gpu_eq_columns, gpu_eq_constraints, gpu_eq_property
from portal.core.bulk import plain_rows
from portal.core.validators import BIGINT_MAX
from portal.core.visibility import VisibleQuerySet, register_scope
from tenants.access import in_tenants_of_user, sees_everything, tenants_led_by
from tenants.models import MemberRole

MICRO = Decimal("0.000001")
# The one denominator GPU-eq-hours are summed over: a second of an hour (3,600) times 2,520,
# which every GPU-eq denominator up to 10 divides (MIG's sevenths and eighths, halves,
# quarters, thirds). Values over one denominator add up in one SQL group: in lowest terms a
# month's records carry hundreds of denominators, and a sum per denominator multiplied the
# groups (and the exact additions in Python) by as many. The daily rollup is written over it.
COMMON_DENOMINATOR = 3600 * 2520


def _over_common(name: str) -> tuple[Case, Case]:
    """The `name` GPU-eq column as (numerator, denominator) SQL over COMMON_DENOMINATOR where
    that is exact and the scaled numerator fits a bigint; as stored otherwise."""
    numerator, denominator = F(f"{name}_num"), F(f"{name}_den")
    exact = Q(Exact(Mod(Value(COMMON_DENOMINATOR), denominator), 0)) & Q(
        **{f"{name}_num__lte": BIGINT_MAX // COMMON_DENOMINATOR}
    )
    scaled = numerator * (Value(COMMON_DENOMINATOR) / denominator)
    return (
        Case(When(exact, then=scaled), default=numerator, output_field=BigIntegerField()),
        Case(
            When(exact, then=Value(COMMON_DENOMINATOR)),
            default=denominator,
            output_field=BigIntegerField(),
        ),
    )


class WindowState(models.TextChoices):
    STARTED = "started", _("started")
    DONE = "done", _("done")
    FAILED = "failed", _("failed")


class MeteringState(models.Model):
    """Where metering of one cluster stands: it began at `begins_at`, is complete until
    `complete_until` (the watermark; None before the first window is done)."""

    cluster = models.OneToOneField(
        "cluster.Cluster", on_delete=models.CASCADE, related_name="metering"
    )
    begins_at = models.DateTimeField(help_text=_("The first hour metered (an hour boundary)"))
    complete_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    demo = models.BooleanField(
        default=False, help_text=_("Collected from the demo's synthetic metrics")
    )
    # Moved by one in the transaction that writes a window's usage: what readings kept
    # between requests are keyed by (portal/metering/kept.py).
    windows_done = models.PositiveBigIntegerField(
        default=0,
        db_default=0,
        help_text=_("Windows collected, counted as their usage is written"),
    )

    def __str__(self) -> str:
        return f"metering of {self.cluster_id}"


class UsageWindow(models.Model):
    """One hour of one cluster's usage, and how far collecting it got."""

    cluster = models.ForeignKey("cluster.Cluster", on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    state = models.CharField(max_length=16, choices=WindowState.choices)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    queries = models.PositiveIntegerField(default=0, help_text=_("Prometheus queries it took"))
    records = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "start"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "start"], name="usage_window_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.start:%Y-%m-%d %H:00} {self.state}"


class WorkloadKind(models.TextChoices):
    NOTEBOOK = "notebook", _("notebook")
    POD = "pod", _("pod")
    # Reserved with no workload on it (an allocation for a batch job not yet running).
    ALLOCATION = "allocation", _("allocation")
    # What the portal cannot attribute: kept per namespace, never dropped.
    UNATTRIBUTED = "unattributed", _("unattributed")


@dataclass
class Measures:
    """The measures of some usage: GPU-eq-hours exact, the others to the microhour."""

    reserved: Fraction = Fraction(0)
    requested: Fraction = Fraction(0)
    used_gpu_hours: Decimal = Decimal(0)
    memory_gib_hours: Decimal = Decimal(0)
    cpu_core_hours: Decimal = Decimal(0)
    ram_gib_hours: Decimal = Decimal(0)

    def add(self, other: "Measures") -> None:
        """Add `other`'s measures to these."""
        self.reserved += other.reserved
        self.requested += other.requested
        self.used_gpu_hours += other.used_gpu_hours
        self.memory_gib_hours += other.memory_gib_hours
        self.cpu_core_hours += other.cpu_core_hours
        self.ram_gib_hours += other.ram_gib_hours


def _exact(parts: dict[int, int]) -> Fraction:
    """The sum of the fractions numerator/denominator given as {denominator: numerator}."""
    if len(parts) == 1:
        ((denominator, numerator),) = parts.items()
        return Fraction(numerator, denominator)
    total = Fraction(0)
    for denominator, numerator in parts.items():
        total += Fraction(numerator, denominator)
    return total


class MeasuresSum:
    """Measures added up: the GPU-eq-hours as whole numerators per denominator (the rows of a
    sum share one or a few), made one exact fraction each at the end (`total`), rather than a
    `Fraction` made, reduced and added for every row; the decimals summed as they come."""

    __slots__ = ("cpu", "memory", "ram", "requested", "reserved", "used")

    def __init__(self) -> None:
        self.reserved: dict[int, int] = {}
        self.requested: dict[int, int] = {}
        self.used = self.memory = self.cpu = self.ram = Decimal(0)

    def add_parts(
        self,
        reserved: tuple[int, int],
        requested: tuple[int, int],
        decimals: Sequence[Decimal],
    ) -> None:
        """Add measures given as (numerator, denominator) pairs and the four decimals in the
        order of Measures' fields."""
        numerator, denominator = reserved
        self.reserved[denominator] = self.reserved.get(denominator, 0) + numerator
        numerator, denominator = requested
        self.requested[denominator] = self.requested.get(denominator, 0) + numerator
        used, memory, cpu, ram = decimals
        self.used += used
        self.memory += memory
        self.cpu += cpu
        self.ram += ram

    def add(self, measures: Measures) -> None:
        self.add_parts(
            (measures.reserved.numerator, measures.reserved.denominator),
            (measures.requested.numerator, measures.requested.denominator),
            (
                measures.used_gpu_hours,
                measures.memory_gib_hours,
                measures.cpu_core_hours,
                measures.ram_gib_hours,
            ),
        )

    def total(self) -> Measures:
        return Measures(
            _exact(self.reserved),
            _exact(self.requested),
            self.used,
            self.memory,
            self.cpu,
            self.ram,
        )


# measure_sums's sums, in the order of Measures' fields.
MEASURES_SUMMED = ("reserved", "requested", "used", "memory", "cpu", "ram")


def measures_summed(
    querysets: Sequence["UsageQuerySet[Any]"], columns: Sequence[str]
) -> dict[tuple[Any, ...], Measures]:
    """`UsageQuerySet.measure_sums` of several querysets of usage (a range's whole months
    from the monthly rollup and the days either side from the daily one) added up per value of
    `columns`: one grouped query each, combined exactly here."""
    sums: dict[tuple[Any, ...], MeasuresSum] = {}
    for rows in querysets:
        rows._add_sums(columns, sums)
    totals = {key: total.total() for key, total in sums.items()}
    if querysets and connections[querysets[0].db].vendor != "postgresql":
        # SQLite sums decimals with more places than it stores; PostgreSQL keeps the
        # columns' six.
        for measures in totals.values():
            measures.used_gpu_hours = measures.used_gpu_hours.quantize(MICRO)
            measures.memory_gib_hours = measures.memory_gib_hours.quantize(MICRO)
            measures.cpu_core_hours = measures.cpu_core_hours.quantize(MICRO)
            measures.ram_gib_hours = measures.ram_gib_hours.quantize(MICRO)
    return totals


class UsageQuerySet[M: models.Model](VisibleQuerySet[M]):
    def measure_sums(self, columns: Sequence[str]) -> dict[tuple[Any, ...], Measures]:
        """The measures summed per value of `columns`, in one grouped query: the fractions'
        numerators over COMMON_DENOMINATOR (or, where one is not exact there, per
        denominator) in SQL, combined exactly here. A rollup's rows are stored over
        COMMON_DENOMINATOR wherever that is exact and fits (`stored_over_common`): they are
        summed per stored denominator, the same groups without working each row's out."""
        return measures_summed([self], columns)

    def _add_sums(self, columns: Sequence[str], sums: dict[tuple[Any, ...], MeasuresSum]) -> None:
        """Add this usage's measures per value of `columns` to `sums` (`measure_sums`)."""
        reserved_num: F | Case
        reserved_den: F | Case
        requested_num: F | Case
        requested_den: F | Case
        if getattr(self.model, "stored_over_common", False):
            reserved_num, reserved_den = F("reserved_num"), F("reserved_den")
            requested_num, requested_den = F("requested_num"), F("requested_den")
        else:
            reserved_num, reserved_den = _over_common("reserved")
            requested_num, requested_den = _over_common("requested")
        grouped = (
            self.order_by()
            .values(*columns, reserved_over=reserved_den, requested_over=requested_den)
            .annotate(
                reserved=Sum(reserved_num),
                requested=Sum(requested_num),
                used=Sum("used_gpu_hours"),
                memory=Sum("memory_gib_hours"),
                cpu=Sum("cpu_core_hours"),
                ram=Sum("ram_gib_hours"),
            )
        )
        width = len(columns)
        for row in plain_rows(
            grouped.values_list(*columns, "reserved_over", "requested_over", *MEASURES_SUMMED)
        ):
            reserved_over, requested_over, reserved, requested, *decimals = row[width:]
            total = sums.get(row[:width])
            if total is None:
                total = sums[row[:width]] = MeasuresSum()
            total.add_parts(
                (int(reserved), reserved_over), (int(requested), requested_over), decimals
            )


class ModelUsageMeasures(models.Model):
    """Where usage happened, down to the GPU model, and the measures: what records and every
    rollup share."""

    # No index of their own: the (cluster, hour) and (tenant, hour) indexes of each table
    # begin with them (a million-row table keeps fewer indexes up to date).
    cluster = models.ForeignKey(
        "cluster.Cluster", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    tenant = models.ForeignKey(
        "tenants.Tenant",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    namespace = models.CharField(max_length=63, blank=True)
    gpu_model = models.ForeignKey(
        "catalog.GpuModel", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reserved_num, reserved_den = gpu_eq_columns("reserved")
    reserved = gpu_eq_property("reserved")
    requested_num, requested_den = gpu_eq_columns("requested")
    requested = gpu_eq_property("requested")
    used_gpu_hours = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    memory_gib_hours = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    # What the pods holding GPUs requested besides them (not GPU memory, above): CPU cores and
    # memory (RAM) in GiB, times the time they ran.
    cpu_core_hours = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    ram_gib_hours = models.DecimalField(max_digits=20, decimal_places=6, default=0)

    objects = UsageQuerySet.as_manager()

    class Meta:
        abstract = True
        constraints = [
            *gpu_eq_constraints("reserved", model="%(class)s"),
            *gpu_eq_constraints("requested", model="%(class)s"),
        ]


class UsageMeasures(ModelUsageMeasures):
    """Where usage happened down to the offering, and the measures: what records and the
    rollups by offering share."""

    offering = models.ForeignKey(
        "catalog.Offering", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta(ModelUsageMeasures.Meta):
        abstract = True


class WorkloadUsage(UsageMeasures):
    """Whose workload the usage was: what the hourly records and the per-workload rollup add
    to the shared columns."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # each table's (user, hour|day) index begins with it
    )
    workload_kind = models.CharField(max_length=16, choices=WorkloadKind.choices)
    # The notebook's name, the pod's name, `allocation-<id>`, or empty when unattributed.
    workload = models.CharField(max_length=253, blank=True)

    class Meta(UsageMeasures.Meta):
        abstract = True


class UsageRecord(WorkloadUsage):
    """One hour x tenant x user x workload x GPU model x offering, in one cluster."""

    hour = models.DateTimeField()
    notebook = models.ForeignKey(
        "workloads.Notebook",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    allocation = models.ForeignKey(
        "allocations.GpuRequest",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )

    class Meta(WorkloadUsage.Meta):
        ordering = ["hour", "id"]
        indexes = [
            models.Index(fields=["cluster", "hour"]),
            models.Index(fields=["tenant", "hour"]),
            models.Index(fields=["user", "hour"]),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.namespace} {self.workload}"


def rollup_indexes(period: str) -> list[models.Index]:
    """A rollup's indexes by `period` (its day or month column): per cluster, per tenant and
    alone (named by Django after each table, as if written out in each)."""
    return [
        models.Index(fields=["cluster", period]),
        models.Index(fields=["tenant", period]),
        models.Index(fields=[period]),
    ]


class UsageDaily(UsageMeasures):
    """The day's usage per cluster x tenant x namespace x GPU model x offering: the rollup
    that keeps a year of dashboards fast. Rewritten whole for the day each time one of its
    hours is collected."""

    # Over COMMON_DENOMINATOR wherever it is exact and fits (`measure_sums`).
    stored_over_common: ClassVar[bool] = True

    day = models.DateField()

    class Meta(UsageMeasures.Meta):
        ordering = ["day", "id"]
        indexes = rollup_indexes("day")

    def __str__(self) -> str:
        return f"{self.day} {self.namespace}"


class UsageMonthly(UsageMeasures):
    """The daily rollup added up per month (`month` its first day): what a range of whole
    months reads, a year being 12 rows per key where it is 365. Rewritten for the month
    whenever one of its days is."""

    # Over COMMON_DENOMINATOR wherever it is exact and fits (`measure_sums`).
    stored_over_common: ClassVar[bool] = True

    month = models.DateField()

    class Meta(UsageMeasures.Meta):
        ordering = ["month", "id"]
        indexes = rollup_indexes("month")

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.namespace}"


class UsageModelDaily(ModelUsageMeasures):
    """The daily rollup added up over offerings: the day's usage per cluster x tenant x
    namespace x GPU model. What readings that do not group by offering read (every tenant's
    usage by tenant or GPU model): a GPU model is offered in several sizes, and on the
    bench's data this has 1.4 times fewer rows than `UsageDaily`, its monthly rollup 5.7
    times fewer than `UsageMonthly` (over a month a tenant uses a model in more sizes).
    Rewritten with it."""

    # Over COMMON_DENOMINATOR wherever it is exact and fits (`measure_sums`).
    stored_over_common: ClassVar[bool] = True

    day = models.DateField()

    class Meta(ModelUsageMeasures.Meta):
        ordering = ["day", "id"]
        indexes = rollup_indexes("day")

    def __str__(self) -> str:
        return f"{self.day} {self.namespace}"


class UsageModelMonthly(ModelUsageMeasures):
    """`UsageModelDaily` added up per month (`month` its first day), as `UsageMonthly` adds up
    `UsageDaily`. Rewritten with it."""

    # Over COMMON_DENOMINATOR wherever it is exact and fits (`measure_sums`).
    stored_over_common: ClassVar[bool] = True

    month = models.DateField()

    class Meta(ModelUsageMeasures.Meta):
        ordering = ["month", "id"]
        indexes = rollup_indexes("month")

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.namespace}"


class UsageWorkloadDaily(WorkloadUsage):
    """The day's usage per workload (cluster x tenant x namespace x user x workload x GPU model
    x offering): the rollup statements are priced from. A statement line is one workload's
    month, so its prices need the workload, which the daily rollup above does not keep; a
    month's hourly records are some ten times as many rows. Rewritten with the daily rollup,
    in the same transaction."""

    # Over COMMON_DENOMINATOR wherever it is exact and fits (`measure_sums`).
    stored_over_common: ClassVar[bool] = True

    day = models.DateField()

    class Meta(WorkloadUsage.Meta):
        ordering = ["day", "id"]
        indexes = [
            models.Index(fields=["cluster", "day"]),
            models.Index(fields=["tenant", "day"]),
            models.Index(fields=["user", "day"]),
            # A month of every tenant (closing it) reads its days alone.
            models.Index(fields=["day"]),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.namespace} {self.workload}"


class GpuHealth(models.Model):
    """A GPU that reported XID errors (DCGM_FI_DEV_XID_ERRORS) during an hour."""

    cluster = models.ForeignKey("cluster.Cluster", on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    node = models.CharField(max_length=253, blank=True)
    gpu_uuid = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=100, blank=True)
    last_xid = models.PositiveIntegerField(help_text=_("The last XID error code seen"))

    class Meta:
        ordering = ["-hour", "node", "gpu_uuid"]
        indexes = [models.Index(fields=["cluster", "hour"])]

    def __str__(self) -> str:
        return f"{self.node} {self.gpu_uuid} XID {self.last_xid}"


class UsageCapacity(models.Model):
    """The GPUs of one model one cluster had during an hour, in GPU-hours (whole GPUs: a
    MIG-partitioned or time-sliced GPU is one), as the DCGM exporter reported them; exact.
    Written with the hour's usage records and rewritten with them. What unreserved capacity is
    measured against (billing's optional "unreserved capacity" line)."""

    cluster = models.ForeignKey("cluster.Cluster", on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    gpu_model = models.ForeignKey(
        "catalog.GpuModel", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    model_name = models.CharField(max_length=100, help_text=_("The DCGM exporter's modelName"))
    gpu_hours_num, gpu_hours_den = gpu_eq_columns("gpu_hours")
    gpu_hours = gpu_eq_property("gpu_hours")

    class Meta:
        ordering = ["hour", "cluster", "model_name"]
        indexes = [models.Index(fields=["cluster", "hour"]), models.Index(fields=["hour"])]
        constraints = [
            *gpu_eq_constraints("gpu_hours", model="usagecapacity"),
            models.UniqueConstraint(
                fields=["cluster", "hour", "model_name"], name="usage_capacity_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.model_name}: {self.gpu_hours}"


def _visible_usage[R: UsageRecord | UsageWorkloadDaily](
    records: models.QuerySet[R], user: User
) -> models.QuerySet[R]:
    """Finance and admins: all, unattributed too; leads: their tenants'; everyone: their own."""
    if sees_everything(user):
        return records
    return records.filter(models.Q(user=user) | in_tenants_of_user(user, [MemberRole.LEAD]))


def _visible_daily[R: UsageDaily | UsageMonthly | UsageModelDaily | UsageModelMonthly](
    rows: models.QuerySet[R], user: User
) -> models.QuerySet[R]:
    """The rollups with no user: finance and admins see all, leads their tenants'."""
    if sees_everything(user):
        return rows
    return rows.filter(tenant__in=tenants_led_by(user))


register_scope(UsageRecord, _visible_usage)
register_scope(UsageDaily, _visible_daily)
register_scope(UsageMonthly, _visible_daily)
register_scope(UsageModelDaily, _visible_daily)
register_scope(UsageModelMonthly, _visible_daily)
register_scope(UsageWorkloadDaily, _visible_usage)
