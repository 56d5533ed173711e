"""Usage pages: my usage, a tenant's usage with its idle allocations, and every tenant's.

Each page is a set of tables built from `usage_totals` (the selector the API uses). A table is
shown as HTML, downloaded as CSV (`?format=csv&table=<name>`, the same rows) and, when it has a
chart, handed to static/js/usage-charts.js through `json_script` (the same rows again), so the
chart, its table and the download cannot disagree. No inline script: the site's CSP forbids it.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from functools import cached_property
from typing import Any, overload
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.allocations.selectors import gpu_request_for
from portal.allocations.services import gpu_request_idle_remind, gpu_request_release
from portal.allocations.views import end_question
from portal.catalog.models import GpuPool
from portal.core import cells
from portal.core.confirm import confirm_page, confirmed
from portal.core.errors import PermissionDenied
from portal.core.exports import csv_download
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import section_response
from portal.metering.idle import DEFAULT_HOURS, DEFAULT_THRESHOLD, MAX_HOURS, idle_allocations
from portal.metering.models import GpuHealth
from portal.metering.selectors import (
    UsageQuery,
    UsageQueryError,
    UsageRow,
    sees_whole_tenant,
    usage_regrouped,
    usage_totals,
    usage_watermarks,
)
from tenants.access import sees_everything, tenant_for, tenants_led_by
from tenants.models import Tenant

DEFAULT_DAYS = 14
HEALTH_ROWS = 500
# The most rows a table shows on a page (a tenant may run thousands of kubectl pods); its CSV
# has them all.
PAGE_ROWS = 200
PLACES = Decimal("0.001")


# Tables: what the HTML, the CSV and the chart data are all made from


@dataclass(frozen=True)
class Chart:
    """Draw `series` columns against `x` (a day column); one chart per value of `split`."""

    x: str
    series: tuple[str, ...]
    split: str = ""


class Formatted[T](Sequence[list[str]]):
    """`items` as table rows, each formatted by `cells` when it is read: a page shows the
    first PAGE_ROWS of a table (every tenant's usage is thousands of rows), its CSV all."""

    def __init__(self, items: Sequence[T], cells: Callable[[T], list[str]]) -> None:
        self.items, self.cells = items, cells

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> list[str]: ...
    @overload
    def __getitem__(self, index: slice) -> list[list[str]]: ...
    def __getitem__(self, index: int | slice) -> list[str] | list[list[str]]:
        if isinstance(index, slice):
            return [self.cells(item) for item in self.items[index]]
        return self.cells(self.items[index])

    def __iter__(self) -> Iterator[list[str]]:
        return map(self.cells, self.items)


@dataclass
class Table:
    name: str
    title: str
    columns: list[tuple[str, str]]  # (key, label)
    rows: Sequence[list[str]] = field(default_factory=list)
    chart: Chart | None = None
    note: str = ""

    @cached_property
    def shown(self) -> list[list[str]]:
        """The rows the page shows (and charts): the first PAGE_ROWS."""
        return list(self.rows[:PAGE_ROWS])

    @property
    def shown_html(self) -> SafeString:
        """The shown rows as the table's `<tr>`s, each cell localised and escaped as the
        template's `{{ cell }}` would: written here, where a cell costs a tenth of what the
        template engine's loop spends on it (*All usage* shows 200 rows of eight: 4.2 -> 0.4
        ms)."""
        return cells.rows(self.shown, _row_html)

    @property
    def cut(self) -> bool:
        return len(self.rows) > PAGE_ROWS

    def as_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "columns": [key for key, _ in self.columns],
            "labels": [label for _, label in self.columns],
            "rows": self.shown,
            "chart": None
            if self.chart is None
            else {"x": self.chart.x, "series": self.chart.series, "split": self.chart.split},
        }


def _row_html(row: Sequence[Any]) -> str:
    return "<tr>" + "".join([f"<td>{cells.text(cell)}</td>" for cell in row]) + "</tr>"


def hours_text(value: Fraction | Decimal) -> str:
    """GPU-(eq-)hours for tables, charts and CSV alike: three places."""
    if isinstance(value, Fraction):
        value = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{value.quantize(PLACES, rounding=ROUND_HALF_UP):f}"


def utilisation_text(row: UsageRow) -> str:
    utilisation = row.utilisation
    if utilisation is None:
        return ""
    return f"{(utilisation * 100).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):f}"


MEASURES: dict[str, tuple[Any, Callable[[UsageRow], str]]] = {
    "reserved": (gettext_lazy("Reserved GPU-eq-h"), lambda row: hours_text(row.reserved)),
    "requested": (gettext_lazy("Requested GPU-eq-h"), lambda row: hours_text(row.requested)),
    "used": (gettext_lazy("Used GPU-h"), lambda row: hours_text(row.used_gpu_hours)),
    "memory": (gettext_lazy("GPU memory GiB-h"), lambda row: hours_text(row.memory_gib_hours)),
    "utilisation": (gettext_lazy("Used / reserved (%)"), utilisation_text),
}


def measure_columns(names: Iterable[str]) -> list[tuple[str, str]]:
    return [(name, MEASURES[name][0]) for name in names]


def measure_cells(row: UsageRow, names: Iterable[str]) -> list[str]:
    return [MEASURES[name][1](row) for name in names]


def days_of(start: date, end: date) -> list[date]:
    return [start + timedelta(days=offset) for offset in range((end - start).days + 1)]


def daily_rows(
    rows: Sequence[UsageRow], start: date, end: date, names: Sequence[str], *, by: str = ""
) -> list[list[str]]:
    """One row per day of the period (zeros where nothing was used), per value of `by`."""
    found = {(row.group["day"], row.group.get(by) if by else None): row for row in rows}
    splits = sorted({key[1] for key in found}, key=lambda value: (value is None, str(value)))
    out = []
    for split in splits or ([None] if not by else []):
        for day in days_of(start, end):
            row = found.get((day, split)) or UsageRow(group={})
            prefix = [day.isoformat()] + ([label_of(split)] if by else [])
            out.append(prefix + measure_cells(row, names))
    return out


def label_of(value: Any, empty: str = "—") -> str:
    return empty if value in (None, "") else str(value)


# The period asked for, and the idle look-back


class UsagePeriodForm(forms.Form):
    """`from` and `to` (ISO dates, inclusive; the last 14 days by default), and on a tenant's
    page `hours`, how far back to look for idle allocations."""

    def __init__(self, data: dict[str, str], *, with_hours: bool = False) -> None:
        super().__init__(data)
        date_input = forms.DateInput(attrs={"type": "date"})
        self.fields["from"] = forms.DateField(label=_("From"), widget=date_input)
        self.fields["to"] = forms.DateField(label=_("To"), widget=date_input)
        if with_hours:
            self.fields["hours"] = forms.IntegerField(
                label=_("Idle over the last (hours)"), min_value=1, max_value=MAX_HOURS
            )


@dataclass
class Period:
    form: UsagePeriodForm
    start: date
    end: date
    hours: int = DEFAULT_HOURS

    @property
    def valid(self) -> bool:
        return not self.form.errors

    def fail(self, error: UsageQueryError) -> None:
        self.form.add_error(error.field if error.field in self.form.fields else None, str(error))


def period_of(request: AuthenticatedHttpRequest, *, with_hours: bool = False) -> Period:
    today = timezone.now().astimezone(UTC).date()
    defaults = {
        "from": (today - timedelta(days=DEFAULT_DAYS - 1)).isoformat(),
        "to": today.isoformat(),
        "hours": str(DEFAULT_HOURS),
    }
    data = {name: request.GET.get(name) or value for name, value in defaults.items()}
    form = UsagePeriodForm(data, with_hours=with_hours)
    period = Period(form, today - timedelta(days=DEFAULT_DAYS - 1), today)
    if form.is_valid():
        period.start, period.end = form.cleaned_data["from"], form.cleaned_data["to"]
        period.hours = form.cleaned_data.get("hours") or DEFAULT_HOURS
        try:
            UsageQuery(period.start, period.end).check()
        except UsageQueryError as error:
            period.fail(error)
    return period


def totals(
    request: AuthenticatedHttpRequest,
    period: Period,
    *,
    regroup: tuple[str, ...] | None = None,
    **query: Any,
) -> list[UsageRow]:
    """usage_totals for the period, or nothing once the period is refused."""
    if not period.valid:
        return []
    try:
        return usage_totals(
            request.user, UsageQuery(period.start, period.end, **query), regroup=regroup
        )
    except UsageQueryError as error:
        period.fail(error)
        return []


# Rendering: the page, or one of its tables as CSV


def csv_response(table: Table, period: Period, prefix: str) -> HttpResponseBase:
    return csv_download(
        [label for _, label in table.columns],
        table.rows,
        filename=f"{prefix}-{table.name}-{period.start}-{period.end}.csv",
    )


def usage_page(
    request: AuthenticatedHttpRequest,
    *,
    template: str,
    period: Period,
    tables: list[Table],
    csv_prefix: str,
    context: dict[str, Any] | None = None,
) -> HttpResponseBase:
    if request.GET.get("format") == "csv":
        wanted = request.GET.get("table", tables[0].name if tables else "")
        table = next((table for table in tables if table.name == wanted), None)
        if table is None:
            raise Http404(_("No such table on this page."))
        if not period.valid:
            errors = "; ".join(
                f"{name}: {' '.join(str(e) for e in found)}"
                for name, found in period.form.errors.items()
            )
            return HttpResponse(errors, status=400, content_type="text/plain; charset=utf-8")
        return csv_response(table, period, csv_prefix)
    query = {name: value for name, value in request.GET.items() if name not in ("format", "table")}
    page_context = {
        "period": period,
        "period_fields": [period.form[name] for name in period.form.fields],
        "watermarks": usage_watermarks(),
        "tables": {table.name: table for table in tables},
        "chart_data": {"tables": [table.as_data() for table in tables if table.chart]},
        "query": query,
        **(context or {}),
    }
    return render(request, template, page_context, status=200 if period.valid else 400)


# My usage


@login_required
def mine(request: AuthenticatedHttpRequest) -> HttpResponseBase:
    """Everyone's own usage: reserved vs used per day, and per notebook (or allocation)."""
    period = period_of(request)
    user = request.user
    # Read once by day and workload, added up each way here (one query, not two).
    per_day_and_workload = totals(request, period, group_by=("day", "workload"), user=user)
    per_day = usage_regrouped(per_day_and_workload, ("day",))
    per_workload = usage_regrouped(per_day_and_workload, ("workload",))
    daily_measures = ("reserved", "used")
    workload_measures = ("reserved", "requested", "used", "memory", "utilisation")
    tables = [
        Table(
            "daily",
            _("Reserved and used per day"),
            [("day", _("Day")), *measure_columns(daily_measures)],
            daily_rows(per_day, period.start, period.end, daily_measures) if period.valid else [],
            chart=Chart("day", daily_measures),
        ),
        Table(
            "workloads",
            _("Per notebook"),
            [
                ("kind", _("Kind")),
                ("workload", _("Notebook or allocation")),
                *measure_columns(workload_measures),
            ],
            Formatted(
                per_workload,
                lambda row: [
                    row.group["workload_kind"],
                    label_of(row.group["workload"]),
                    *measure_cells(row, workload_measures),
                ],
            ),
        ),
    ]
    led = list(tenants_led_by(user).order_by("slug").values_list("slug", "name"))
    return usage_page(
        request,
        template="metering/mine.html",
        period=period,
        tables=tables,
        csv_prefix="my-usage",
        context={"tenants_led": led},
    )


# A tenant's usage


def tenant_usage_for(request: AuthenticatedHttpRequest, slug: str) -> Tenant:
    """The tenant, for its leads, finance and admins (who see its usage); 404 for anyone else,
    its developers included, so the page does not tell them more than their own usage page."""
    tenant = tenant_for(request.user, slug)
    user = request.user
    if not sees_whole_tenant(user, tenant):
        raise Http404(_("No such tenant."))
    return tenant


def may_release(request: AuthenticatedHttpRequest) -> bool:
    """Leads and admins release a tenant's allocations; finance reads only."""
    return request.user.is_portal_admin or not sees_everything(request.user)


def idle_context(
    request: AuthenticatedHttpRequest, tenant: Tenant, period: Period
) -> dict[str, Any]:
    idle = idle_allocations(tenants=[tenant], hours=period.hours) if period.valid else []
    return {
        "tenant": tenant,
        "idle": idle,
        "hours": period.hours,
        "threshold_percent": f"{DEFAULT_THRESHOLD * 100:.0f}",
        "may_release": may_release(request),
    }


@login_required
def tenant_usage(
    request: AuthenticatedHttpRequest, slug: str, *, idle_inline: bool = False
) -> HttpResponseBase:
    """A tenant's usage per model over time, per member and per workload; its idle
    allocations (loaded after the page from `tenant_idle`, or written in: `idle_inline`)."""
    tenant = tenant_usage_for(request, slug)
    period = period_of(request, with_hours=True)
    per_model = totals(request, period, group_by=("day", "model"), tenant=tenant)
    per_user = totals(request, period, group_by=("user",), tenant=tenant)
    per_workload = totals(request, period, group_by=("workload",), tenant=tenant)
    model_measures = ("reserved", "requested", "used")
    measures = ("reserved", "requested", "used", "memory", "utilisation")
    tables = [
        Table(
            "models",
            _("Per GPU model and day"),
            [("day", _("Day")), ("model", _("GPU model")), *measure_columns(model_measures)],
            daily_rows(per_model, period.start, period.end, model_measures, by="model"),
            chart=Chart("day", model_measures, split="model"),
        ),
        Table(
            "members",
            _("Per member"),
            [("user", _("Member")), *measure_columns(measures)],
            Formatted(
                per_user,
                lambda row: [
                    label_of(row.group["user"], _("(pods not started by the portal)")),
                    *measure_cells(row, measures),
                ],
            ),
        ),
        Table(
            "workloads",
            _("Per workload"),
            [("kind", _("Kind")), ("workload", _("Workload")), *measure_columns(measures)],
            Formatted(
                per_workload,
                lambda row: [
                    row.group["workload_kind"],
                    label_of(row.group["workload"]),
                    *measure_cells(row, measures),
                ],
            ),
        ),
    ]
    # The idle allocations load after the page (htmx, `tenant_idle`), but where they are
    # written in: the page's without JavaScript, or a period refused.
    inline = idle_inline or not period.valid
    context = idle_context(request, tenant, period) if inline else {"tenant": tenant}
    query = urlencode({name: value for name, value in request.GET.items() if name != "format"})
    idle_url = reverse("metering:tenant-idle", args=[tenant.slug])
    return usage_page(
        request,
        template="metering/tenant.html",
        period=period,
        tables=tables,
        csv_prefix=f"usage-{tenant.slug}",
        context=context | {"idle_inline": inline, "idle_url": f"{idle_url}?{query}"},
    )


@login_required
@require_GET
def tenant_idle(request: AuthenticatedHttpRequest, slug: str) -> HttpResponseBase:
    """A tenant's idle allocations over the usage page's look-back: to htmx the section that
    takes its place on the page, and without JavaScript the page with it written in."""

    def fragment() -> HttpResponse:
        tenant = tenant_usage_for(request, slug)
        period = period_of(request, with_hours=True)
        status = 200 if period.valid else 400
        context = idle_context(request, tenant, period)
        return render(request, "metering/tenant.html#idle", context, status=status)

    return section_response(
        alone=bool(request.htmx),
        fragment=fragment,
        page=lambda: tenant_usage(request, slug, idle_inline=True),
    )


def _idle_action(
    request: AuthenticatedHttpRequest,
    slug: str,
    pk: int,
    act: Callable[[GpuRequest], str],
    *,
    ask: str = "",
) -> HttpResponse:
    """Act on one of the tenant's allocations from its usage page; htmx gets the refreshed
    list with what happened, a plain form the page again with a message. With `ask` (release),
    a holding allocation asks first (portal.core.confirm)."""
    tenant = tenant_usage_for(request, slug)
    allocation = gpu_request_for(request.user, pk)
    if allocation.tenant_id != tenant.pk:
        raise Http404(_("No such allocation in this tenant."))
    if ask and not may_release(request):
        raise PermissionDenied(_("Only the tenant's leads and admins release its allocations."))
    if ask and allocation.state in HOLDING_STATES and not confirmed(request):
        cancel_url = reverse("metering:tenant", args=[tenant.slug])
        return confirm_page(request, end_question(allocation, ask, cancel_url))
    note = act(allocation)
    if request.htmx:
        period = period_of(request, with_hours=True)
        context = idle_context(request, tenant, period) | {"released": note}
        return render(request, "metering/tenant.html#idle", context)
    messages.success(request, note)
    return redirect("metering:tenant", slug=tenant.slug)


@login_required
@require_POST
def idle_release(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    """Release an idle allocation (allocations' service: the state, the audit event and the
    namespace's quota follow)."""

    def release(allocation: GpuRequest) -> str:
        if allocation.state == RequestState.RELEASED:  # a second submission: released once
            return _("Allocation %(pk)s is released already.") % {"pk": allocation.pk}
        released = gpu_request_release(actor=request.user, gpu_request=allocation)
        return _("Allocation %(id)s is %(state)s.") % {
            "id": released.pk,
            "state": released.get_state_display(),
        }

    return _idle_action(request, slug, pk, release, ask="release")


@login_required
@require_POST
def idle_remind(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    """Ask an idle allocation's owner to release it (allocations' service: audited, emailed)."""

    def remind(allocation: GpuRequest) -> str:
        reminded = gpu_request_idle_remind(actor=request.user, gpu_request=allocation)
        return _("%(user)s is asked to release allocation %(id)s.") % {
            "user": reminded.requester.username,
            "id": reminded.pk,
        }

    return _idle_action(request, slug, pk, remind)


# Every tenant's usage


@login_required
def all_usage(request: AuthenticatedHttpRequest) -> HttpResponseBase:
    """Finance and admins: every tenant per model, per model with its pools, unattributed
    usage per namespace, usage per day; admins also GPU health."""
    if not sees_everything(request.user):
        raise Http404
    period = period_of(request)
    measures = ("reserved", "requested", "used", "memory", "utilisation")
    per_tenant = totals(request, period, group_by=("tenant", "model"))
    per_model = totals(request, period, group_by=("tenant", "model"), regroup=("model",))
    per_day = totals(request, period, group_by=("day",))
    pools: dict[str, list[str]] = {}
    for cluster, name, model in GpuPool.objects.order_by("cluster", "name").values_list(
        "cluster", "name", "gpu_model__slug"
    ):
        pools.setdefault(model, []).append(f"{cluster}/{name}")
    day_measures = ("reserved", "requested", "used")
    tables = [
        Table(
            "daily",
            _("Every tenant per day"),
            [("day", _("Day")), *measure_columns(day_measures)],
            daily_rows(per_day, period.start, period.end, day_measures) if period.valid else [],
            chart=Chart("day", day_measures),
        ),
        Table(
            "tenants",
            _("Per tenant and GPU model"),
            [("tenant", _("Tenant")), ("model", _("GPU model")), *measure_columns(measures)],
            Formatted(
                [row for row in per_tenant if row.group["tenant"] is not None],
                lambda row: [
                    row.group["tenant"],
                    label_of(row.group["model"]),
                    *measure_cells(row, measures),
                ],
            ),
        ),
        Table(
            "models",
            _("Per GPU model and its pools"),
            [("model", _("GPU model")), ("pools", _("Pools")), *measure_columns(measures)],
            [
                [
                    label_of(row.group["model"]),
                    ", ".join(pools.get(row.group["model"], [])),
                    *measure_cells(row, measures),
                ]
                for row in per_model
            ],
            note=_(
                "Usage is recorded per GPU model, not per pool: a model's pools are shown together."
            ),
        ),
        Table(
            "unattributed",
            _("Unattributed usage per namespace"),
            [
                ("namespace", _("Namespace")),
                ("model", _("GPU model")),
                *measure_columns(("requested", "used", "memory")),
            ],
            [
                [
                    label_of(row.group["namespace"]),
                    label_of(row.group["model"]),
                    *measure_cells(row, ("requested", "used", "memory")),
                ]
                for row in per_tenant
                if row.group["tenant"] is None
            ],
            note=_("Pods in namespaces the portal does not manage, and busy GPUs no pod held."),
        ),
    ]
    if request.user.is_portal_admin:
        tables.append(health_table(period))
    return usage_page(
        request, template="metering/all.html", period=period, tables=tables, csv_prefix="usage"
    )


def health_table(period: Period) -> Table:
    """GPUs that reported XID errors in the period: the latest report of each. One query."""
    table = Table(
        "health",
        _("GPU health (XID errors)"),
        [
            ("cluster", _("Cluster")),
            ("node", _("Node")),
            ("gpu", _("GPU")),
            ("model", _("Model")),
            ("last_xid", _("Last XID")),
            ("hour", _("Last seen (UTC)")),
        ],
        note=_("The latest %(count)s reports at most.") % {"count": HEALTH_ROWS},
    )
    if not period.valid:
        return table
    begin = datetime.combine(period.start, datetime.min.time(), tzinfo=UTC)
    reports = (
        GpuHealth.objects.filter(
            hour__gte=begin, hour__lt=begin + timedelta(days=(period.end - period.start).days + 1)
        )
        .order_by("-hour", "node", "gpu_uuid")
        .values_list("cluster__name", "node", "gpu_uuid", "model_name", "last_xid", "hour")
    )[:HEALTH_ROWS]
    seen = set()
    rows = []
    for cluster, node, gpu, model, xid, hour in reports:
        if (cluster, node, gpu) in seen:
            continue
        seen.add((cluster, node, gpu))
        rows.append([cluster, node, gpu, model, str(xid), f"{hour:%Y-%m-%d %H:00}"])
    table.rows = rows
    return table
