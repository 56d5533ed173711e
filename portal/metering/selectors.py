"""Reading usage: totals grouped as asked, for what a user may see, and the watermark.

Pages and the API both call `usage_totals`. It reads the daily rollup when the grouping and the
caller allow (no user, workload or hour; someone who sees every row of the tenants asked for),
its whole months from the monthly rollup unless grouped by day, both by GPU model unless
grouped by offering,
the per-workload daily rollup when it can (no hour, no single notebook: the same rows a caller
may see as in the records), and the hourly records otherwise. One grouped query (two with whole
months), whatever the number of rows: the exact fractions are summed over one denominator in SQL and
combined in Python. Every tenant's usage is grouped by ids and named after (`_named`), and kept
until the usage changes (`portal/metering/kept.py`).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Model, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.catalog.cache import catalog_rows
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import GpuModel, Offering
from portal.core.errors import NotFound
from portal.metering.kept import KeptReadings, usage_inputs
from portal.metering.models import (
    Measures,
    MeasuresSum,
    MeteringState,
    UsageDaily,
    UsageModelDaily,
    UsageModelMonthly,
    UsageMonthly,
    UsageQuerySet,
    UsageRecord,
    UsageWindow,
    UsageWorkloadDaily,
    measures_summed,
)
from tenants.access import role_in, sees_everything
from tenants.models import MemberRole, Tenant

GROUPS = ("tenant", "user", "workload", "model", "offering", "day", "hour")
# Each group as the columns it reads; the groups the daily rollup and the per-workload daily
# rollup can give.
_COLUMNS: dict[str, tuple[str, ...]] = {
    "tenant": ("tenant__slug", "namespace"),
    "user": ("user__username",),
    "workload": ("workload_kind", "workload"),
    "model": ("gpu_model__slug",),
    "offering": ("offering__slug",),
    "day": ("day",),
    "hour": ("hour",),
}
_DAILY_GROUPS = {"tenant", "model", "offering", "day"}
_WORKLOAD_GROUPS = _DAILY_GROUPS | {"user", "workload"}
# The names rows carry, per column read.
_NAMES = {
    "tenant__slug": "tenant",
    "namespace": "namespace",
    "user__username": "user",
    "workload_kind": "workload_kind",
    "workload": "workload",
    "gpu_model__slug": "model",
    "offering__slug": "offering",
    "day": "day",
    "hour": "hour",
}
# The columns that name a row by a foreign key, which a reading of every tenant's usage groups
# by the key and names after: PostgreSQL then sorts (or hashes) some hundred thousand rollup
# rows by integers rather than by text in the database's collation, and joins no table for
# the names. (The key's column, its model, the name's field.)
_BY_ID: dict[str, tuple[str, type[Model], str]] = {
    "tenant__slug": ("tenant_id", Tenant, "slug"),
    "user__username": ("user_id", User, "username"),
    "gpu_model__slug": ("gpu_model_id", GpuModel, "slug"),
    "offering__slug": ("offering_id", Offering, "slug"),
}
MAX_DAYS = 366
EARLIEST, LATEST = date(2000, 1, 1), date(9998, 12, 31)
MAX_HOURLY_DAYS = 31


class UsageQueryError(ValueError):
    """The question cannot be answered as asked; `field` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class UsageRow(Measures):
    """Totals for one group: GPU-eq-hours exact, used and memory to the microhour."""

    group: dict[str, Any] = field(default_factory=dict)

    @property
    def utilisation(self) -> Decimal | None:
        """Used over reserved GPU-hours, as a fraction of 1 (None when nothing was reserved)."""
        if not self.reserved:
            return None
        reserved = Decimal(self.reserved.numerator) / Decimal(self.reserved.denominator)
        return (self.used_gpu_hours / reserved).quantize(Decimal("0.0001"))

    def as_dict(self) -> dict[str, Any]:
        utilisation = self.utilisation
        return {
            **self.group,
            "reserved_gpu_eq_hours": str(self.reserved),
            "reserved_display": gpu_eq_display(self.reserved),
            "requested_gpu_eq_hours": str(self.requested),
            "requested_display": gpu_eq_display(self.requested),
            "used_gpu_hours": f"{self.used_gpu_hours:f}",
            "memory_gib_hours": f"{self.memory_gib_hours:f}",
            "utilisation": None if utilisation is None else f"{utilisation:f}",
            "cpu_core_hours": f"{self.cpu_core_hours:f}",
            "ram_gib_hours": f"{self.ram_gib_hours:f}",
        }


@dataclass
class UsageQuery:
    start: date
    end: date  # inclusive
    group_by: Sequence[str] = ()
    tenant: Tenant | None = None
    user: User | None = None  # only this user's usage (my usage)
    notebook_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        for name, day in (("from", self.start), ("to", self.end)):
            if not EARLIEST <= day <= LATEST:
                raise UsageQueryError(
                    name,
                    _("Give a date from %(first)s to %(last)s.")
                    % {"first": EARLIEST, "last": LATEST},
                )
        if self.end < self.start:
            raise UsageQueryError("to", _("The end date is before the start date."))
        days = (self.end - self.start).days + 1
        if days > MAX_DAYS:
            raise UsageQueryError(
                "to", _("Ask for at most %(days)s days at a time.") % {"days": MAX_DAYS}
            )
        unknown = [group for group in self.group_by if group not in GROUPS]
        if unknown:
            raise UsageQueryError(
                "group_by",
                _("Unknown grouping %(group)s: use %(groups)s.")
                % {"group": repr(unknown[0]), "groups": ", ".join(GROUPS)},
            )
        if "hour" in self.group_by and days > MAX_HOURLY_DAYS:
            raise UsageQueryError(
                "group_by",
                _("Group by hour over at most %(days)s days.") % {"days": MAX_HOURLY_DAYS},
            )


def sees_whole_tenant(viewer: User, tenant: Tenant | None) -> bool:
    """Whether `viewer` sees every usage row of `tenant`: finance, admins and its leads (from
    their roles, read once for their request)."""
    if sees_everything(viewer):
        return True
    return tenant is not None and role_in(viewer, tenant) == MemberRole.LEAD


def _uses_daily(viewer: User, query: UsageQuery) -> bool:
    if query.user is not None or query.notebook_id is not None:
        return False
    if not _DAILY_GROUPS.issuperset(query.group_by):
        return False
    return sees_whole_tenant(viewer, query.tenant)


def usage_totals(
    viewer: User, query: UsageQuery, *, regroup: tuple[str, ...] | None = None
) -> list[UsageRow]:
    """Usage `viewer` may see, grouped by `query.group_by`, in group order (then by `regroup`,
    fewer of them, as `usage_regrouped` adds them up). One query (two where whole months come
    from the monthly rollup), and for every tenant's usage grouped by tenant or user one more
    that names them. Every tenant's usage, and one tenant's read from the rollups, is kept in
    the process until it changes, one query more to know that (`portal/metering/kept.py`): one
    query when kept. The rows are read-only."""
    query.check()
    rows: UsageQuerySet[Any]
    months: UsageQuerySet[Any] | None = None
    rollups = _uses_daily(viewer, query)
    if rollups:
        # Without offerings, the rollups by GPU model: some six times fewer rows.
        daily, monthly = (
            (UsageDaily, UsageMonthly)
            if "offering" in query.group_by
            else (UsageModelDaily, UsageModelMonthly)
        )
        first, following = _whole_months(query.start, query.end, timezone.now().date())
        if "day" in query.group_by or first == following:
            rows = daily.objects.visible_to(viewer).filter(day__gte=query.start, day__lte=query.end)
        else:
            # The whole months from the monthly rollup, the days either side from the daily.
            months = monthly.objects.visible_to(viewer).filter(
                month__gte=first, month__lt=following
            )
            rows = daily.objects.visible_to(viewer).filter(
                Q(day__gte=query.start, day__lt=first) | Q(day__gte=following, day__lte=query.end)
            )
    elif query.notebook_id is None and _WORKLOAD_GROUPS.issuperset(query.group_by):
        # The same visibility as the records (their own, and their led tenants').
        workloads = UsageWorkloadDaily.objects.visible_to(viewer).filter(
            day__gte=query.start, day__lte=query.end
        )
        rows = workloads if query.user is None else workloads.filter(user=query.user)
        # Rewritten with the other rollups when a window is collected (`kept.py`).
        rollups = query.user is None
    else:
        begin = datetime.combine(query.start, time(), tzinfo=UTC)
        finish = datetime.combine(query.end + timedelta(days=1), time(), tzinfo=UTC)
        records = UsageRecord.objects.visible_to(viewer).filter(hour__gte=begin, hour__lt=finish)
        if query.user is not None:
            records = records.filter(user=query.user)
        if query.notebook_id is not None:
            records = records.filter(notebook_id=query.notebook_id)
        rows = (
            records.annotate(day=TruncDate("hour", tzinfo=UTC))
            if "day" in query.group_by
            else records
        )
    if query.tenant is not None:
        rows = rows.filter(tenant=query.tenant)
        months = months.filter(tenant=query.tenant) if months is not None else None
    columns = [column for group in query.group_by for column in _COLUMNS[group]]
    # Every tenant's usage (finance, admins) is grouped by ids and named after; a few
    # tenants' groups, or one user's, are named in the query, as a lookup would cost a query
    # more.
    by_id = (
        query.tenant is None
        and query.user is None
        and query.notebook_id is None
        and sees_everything(viewer)
    )
    readings = [rows] if months is None else [rows, months]
    # Every tenant's, or one tenant's from the rollups (for someone who sees all of its rows):
    # the same for everyone who may read it, kept until the usage changes.
    whole_tenant = rollups and query.tenant is not None and sees_whole_tenant(viewer, query.tenant)
    if not (by_id or whole_tenant):
        grouped = _grouped(readings, columns, by_id=False)
        return grouped if regroup is None else usage_regrouped(grouped, regroup)
    key = (
        None if query.tenant is None else query.tenant.pk,
        tuple(query.group_by),
        query.start,
        query.end,
        usage_inputs([reading.model for reading in readings], stamped=[Tenant]),
    )
    kept = _everyones if by_id else _tenants
    grouped = kept.read(key, lambda: _grouped(readings, columns, by_id=by_id))
    if regroup is None:
        return grouped
    # Added up again (every tenant's 2,000 rows by model: 5 ms), kept beside them.
    return kept.read((*key, "regrouped", regroup), lambda: usage_regrouped(grouped, regroup))


# Usage readings kept in this process (portal/metering/kept.py): every tenant's (some thousands
# of rows each), and single tenants' apart (a few rows each, for many tenants' leads).
_everyones: KeptReadings[UsageRow] = KeptReadings()
_tenants: KeptReadings[UsageRow] = KeptReadings()


def _grouped(
    readings: Sequence[UsageQuerySet[Any]], columns: Sequence[str], *, by_id: bool
) -> list[UsageRow]:
    """`readings` grouped by `columns`, in group order (`usage_totals`)."""
    keys = [_BY_ID[column][0] if by_id and column in _BY_ID else column for column in columns]
    sums = measures_summed(readings, keys)
    if by_id:
        sums = _named(sums, columns)
    totals = {
        key: UsageRow(
            group={_NAMES[column]: value for column, value in zip(columns, key, strict=True)},
            **measures.__dict__,
        )
        for key, measures in sums.items()
    }
    return [totals[key] for key in sorted(totals, key=_sort_key)]


# Past this many ids, names are read for the whole table: a thousand ids in an `IN` list cost
# PostgreSQL 16 ms to parse, and every tenant's slug 1.3 ms (every user's, of 10,000, 12 ms).
_NAMES_BY_ID_AT_MOST = 100


def _names(model: type[Model], field_name: str, ids: set[int]) -> dict[int, str]:
    """The name (`field_name`) of each of `ids`: GPU models and offerings from the process's
    catalog rows where it has them all, else one query."""
    if not ids:
        return {}
    catalog = catalog_rows() if model in (GpuModel, Offering) else None
    kept = catalog.by_model[model] if catalog is not None else {}
    if ids.issubset(kept):
        return {pk: getattr(kept[pk], field_name) for pk in ids}
    rows = model._default_manager.order_by()
    if len(ids) <= _NAMES_BY_ID_AT_MOST:
        rows = rows.filter(pk__in=ids)
    return dict(rows.values_list("pk", field_name))


def _named(
    sums: dict[tuple[Any, ...], Measures], columns: Sequence[str]
) -> dict[tuple[Any, ...], Measures]:
    """`sums`, keyed by the ids `_BY_ID` groups by, keyed by the names `columns` read: one query
    per kind of id at most (none for the catalog's). A missing row names nothing (None), as
    the join it replaces would."""
    lookups: list[dict[int, str] | None] = []
    for index, column in enumerate(columns):
        if column not in _BY_ID:
            lookups.append(None)
            continue
        _key, model, field_name = _BY_ID[column]
        lookups.append(_names(model, field_name, {key[index] for key in sums} - {None}))
    if not any(lookup is not None for lookup in lookups):
        return sums
    named: dict[tuple[Any, ...], Measures] = {}
    for key, measures in sums.items():
        name = tuple(
            value if lookup is None or value is None else lookup.get(value)
            for value, lookup in zip(key, lookups, strict=True)
        )
        total = named.get(name)
        if total is None:
            named[name] = measures
        else:
            total.add(measures)
    return named


def usage_regrouped(rows: list[UsageRow], group_by: Sequence[str]) -> list[UsageRow]:
    """`rows` (from `usage_totals`) added up again by fewer groups, `group_by` among theirs:
    the same rows, in the same order, as `usage_totals` grouped that way, without reading the
    usage again."""
    names = [_NAMES[column] for group in group_by for column in _COLUMNS[group]]
    sums: dict[tuple[Any, ...], MeasuresSum] = {}
    for row in rows:
        key = tuple(row.group[name] for name in names)
        total = sums.get(key)
        if total is None:
            total = sums[key] = MeasuresSum()
        total.add(row)
    return [
        UsageRow(group=dict(zip(names, key, strict=True)), **sums[key].total().__dict__)
        for key in sorted(sums, key=_sort_key)
    ]


def _whole_months(start: date, end: date, today: date) -> tuple[date, date]:
    """The first day of the first whole month within `start`..`end` (inclusive) and the first
    day after the last one; the same day twice when no month is whole. A range that reaches
    `today` holds the rest of its last month too, as no usage is stored after today: the
    month so far is read from its monthly row (a year up to today is 12 monthly rows per key
    and a few days, not 11 and a month of daily ones)."""
    first = start if start.day == 1 else (start.replace(day=1) + timedelta(days=31)).replace(day=1)
    if end >= today:
        end = (end.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    after = end + timedelta(days=1)
    following = after if after.day == 1 else end.replace(day=1)
    return (first, following) if first < following else (first, first)


def _sort_key(key: tuple[Any, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((value is None, str(value)) for value in key)


@dataclass(frozen=True)
class Watermark:
    cluster: str
    complete_until: datetime | None
    last_error: str
    demo: bool


def usage_watermarks() -> list[Watermark]:
    """Per metered cluster, up to when its usage is complete. One query."""
    states = (
        MeteringState.objects.filter(cluster__enabled=True)
        .annotate(name=F("cluster__name"))
        .order_by("cluster__name")
    )
    return [
        Watermark(state.name, state.complete_until, state.last_error, state.demo)
        for state in states
    ]


def usage_complete_until(marks: list[Watermark] | None = None) -> datetime | None:
    """Up to when usage is complete on every metered cluster (the earliest watermark; None
    while one has none). Reads the watermarks unless given them."""
    until = [mark.complete_until for mark in (usage_watermarks() if marks is None else marks)]
    if not until or any(moment is None for moment in until):
        return None
    return min(moment for moment in until if moment is not None)


def usage_windows_for(user: User) -> QuerySet[UsageWindow]:
    """Every cluster's metering windows, newest first (admins; NotFound for anyone else)."""
    if not user.is_portal_admin:
        raise NotFound(_("There is no such page."))
    return UsageWindow.objects.select_related("cluster").order_by("-start", "cluster__name")
