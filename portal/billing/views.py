"""Chargeback pages: a month's statements per tenant and cost centre (finance's start page), one
statement with its lines, history and downloads (CSV, XLSX), closing and reopening a month, and
the rate cards.

Finance and admins see every tenant's statements, leads their tenants'; anyone else gets 404.
Everyone signed in sees the rate cards. Reads go through portal.billing.selectors, writes
through portal.billing.services; refusals are shown where the user acted, with their status.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, cast
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_GET, require_POST

from portal.accounts.models import User
from portal.billing import downloads
from portal.billing.budget_views import BudgetPanel
from portal.billing.budgets import budget_column
from portal.billing.forms import ChargebackFilterForm, PeriodReopenForm, RateCardForm
from portal.billing.models import PeriodState, RateCard
from portal.billing.pricing import current_month
from portal.billing.selectors import (
    CentreTotal,
    LineView,
    MonthStatements,
    StatementView,
    grand_totals,
    month_of,
    periods,
    rate_cards,
    statement_for,
    statement_history,
    statement_lines,
)
from portal.billing.services import period_close, period_reopen, rate_card_create
from portal.billing.spend import CHART_MONTHS, shift, spend_charts_for
from portal.core import cells
from portal.core.errors import Conflict, PermissionDenied, ValidationFailed
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import PageSection, form_add_error, form_page, section_response
from portal.core.pagination import BoundedPaginator
from portal.metering.selectors import usage_watermarks
from portal.metering.views import hours_text
from tenants.access import sees_everything, tenants_led_by
from tenants.models import Tenant

# The most lines a statement's page shows; its CSV has them all.
PAGE_LINES = 500
# Statements per page of a month's (its totals cover them all).
PAGE_STATEMENTS = 50


def _require_reader(user: User) -> None:
    """Finance, admins and leads read chargeback; for anyone else it does not exist."""
    if not sees_everything(user) and not tenants_led_by(user).exists():
        raise Http404(gettext("No such page."))


def _may_close(user: User) -> bool:
    return user.is_finance or user.is_portal_admin


def _month_in_url(text: str) -> date:
    """The month a URL names; a 400 page naming the field otherwise."""
    return month_of(text, field="period")


# A month's statements


def _cost_centres(user: User) -> list[str]:
    tenants = Tenant.objects.all() if sees_everything(user) else tenants_led_by(user)
    return list(tenants.order_by("cost_centre").values_list("cost_centre", flat=True).distinct())


def _sort_links(query: dict[str, str], sort: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the query sorting by it (the other way round when it is the current
    sort) and its aria-sort."""
    links = {}
    for column in ("tenant", "cost_centre", "total"):
        descending = sort == f"-{column}"
        ascending = sort == column
        links[column] = {
            "query": urlencode({**query, "sort": column if not ascending else f"-{column}"}),
            "aria": "ascending" if ascending else "descending" if descending else "none",
        }
    return links


# The sections, in the page's order.
SECTIONS = ("centre-totals", "spend")


def _section_titles() -> dict[str, str]:
    return {"centre-totals": gettext("Totals per cost centre"), "spend": gettext("Spend")}


def _statements_page(
    request: AuthenticatedHttpRequest,
    form: ChargebackFilterForm,
    *,
    status: int = 200,
    close_error: str = "",
    reopen_form: PeriodReopenForm | None = None,
    inline: str = "",
) -> HttpResponse:
    """The page, its sections loaded after it but `inline`'s (a section's page without
    JavaScript)."""
    user = request.user
    context: dict[str, Any] = {
        "form": form,
        "close_error": close_error,
        "reopen_form": reopen_form or PeriodReopenForm(),
        "last_closed": periods().filter(state=PeriodState.CLOSED).first(),
        "watermarks": usage_watermarks() if _may_close(user) else [],
    }
    if form.is_valid():
        month = form.cleaned_data["period"]
        sort = form.cleaned_data["sort"]
        centre = form.cleaned_data["cost_centre"]
        listed = MonthStatements(user, month, cost_centre=centre or None, sort=sort)
        paginator = BoundedPaginator(cast("Sequence[StatementView]", listed), PAGE_STATEMENTS)
        page = paginator.get_page(request.GET.get("page"))
        shown: list[StatementView] = list(page.object_list)
        budgets_used = budget_column(month, shown)
        for view in shown:
            view.budget_used = budgets_used.get(view.tenant.pk, "")
        period = listed.period
        closed = period is not None and period.state == PeriodState.CLOSED
        query = {"period": f"{month:%Y-%m}", **({"cost_centre": centre} if centre else {})}
        following = shift(month, 1)
        # The sections load with the page's query (month, cost centre, sort, their pages).
        section_query = urlencode({**request.GET.dict(), **query, "sort": sort})
        titles = _section_titles()
        context |= {
            "month": month,
            "month_text": f"{month:%Y-%m}",
            "period": period,
            "closed": closed,
            "ended": month < current_month(),
            "statements": shown,
            "statement_rows": cells.rows(shown, _statements_row()),
            "page": page,
            "sort_links": _sort_links(query, sort),
            "previous": f"{shift(month, -1):%Y-%m}",
            "following": f"{following:%Y-%m}" if following <= current_month() else "",
            "may_close": _may_close(user) and not closed and month < current_month(),
            "may_reopen": user.is_portal_admin and closed,
            "sections": [
                PageSection(
                    name,
                    f"billing/statements.html#{name}",
                    titles[name],
                    inline=name == inline,
                    url=f"{reverse('billing:section', args=[name])}?{section_query}",
                )
                for name in SECTIONS
            ],
        }
        if inline:
            context |= _section_context(request, inline, month, centre, listed)
    else:
        status = 400
    template = "billing/statements.html"
    if request.htmx and request.method == "GET":
        template += "#chargeback"
    return render(request, template, context, status=status)


def _section_context(
    request: AuthenticatedHttpRequest,
    name: str,
    month: date,
    cost_centre: str,
    listed: MonthStatements | None = None,
) -> dict[str, Any]:
    """What section `name` of `month` writes; the totals per cost centre are those of
    `listed` (the page's statements) or read here, the spend chart reads its own."""
    context: dict[str, Any] = {"month": month, "month_text": f"{month:%Y-%m}"}
    if name == "spend":
        return context | _spend_context(request.user, month, cost_centre)
    listed = listed or MonthStatements(request.user, month, cost_centre=cost_centre or None)
    centre_totals = listed.centre_totals()
    centres = BoundedPaginator(centre_totals, PAGE_STATEMENTS).get_page(
        request.GET.get("centres_page")
    )
    return context | {
        "centres": centres,
        "centre_rows": cells.rows(centres.object_list, _centre_row),
        "grand_totals": grand_totals(centre_totals),
    }


def _statements_row() -> Callable[[StatementView], str]:
    """The writer of one statement's `<tr>` on the *Chargeback* page (see
    `portal.core.cells`), its words translated once."""
    # The words outside the f-strings: xgettext reads no call inside one.
    final_text, provisional_text = gettext("final"), gettext("provisional")
    final = f'<span class="state final">{cells.text(final_text)}</span>'
    provisional = f'<span class="state provisional">{cells.text(provisional_text)}</span>'
    detail = cells.url_of_each("billing:statement")

    def row(statement: StatementView) -> str:
        slug = cells.text(statement.tenant.slug)
        status = final if statement.final else provisional
        if statement.problem:
            status += (
                f'<br><small class="error" data-testid="problem-{slug}">'
                f"{cells.text(statement.problem)}</small>"
            )
        return (
            f'<tr data-testid="statement-{slug}">'
            f'<td><a href="{detail(statement.id)}">{cells.text(statement.tenant.name)}</a></td>'
            f"<td>{cells.text(statement.cost_centre or '—')}</td>"
            f"<td>{cells.text(statement.currency or '—')}</td>"
            f'<td class="number" data-testid="total-{slug}">{cells.text(statement.total)}</td>'
            f'<td class="number" data-testid="budget-used-{slug}">'
            f"{cells.text(statement.budget_used or '—')}</td>"
            f"<td>{status}</td></tr>"
        )

    return row


def _centre_row(row: CentreTotal) -> str:
    """One cost centre's `<tr>` in the totals per cost centre."""
    return (
        f'<tr data-testid="centre-{cells.text(row.cost_centre or "none")}">'
        f"<td>{cells.text(row.cost_centre or '—')}</td><td>{cells.text(row.statements)}</td>"
        f"<td>{cells.text(row.currency or '—')}</td>"
        f'<td class="number">{cells.text(row.total)}</td></tr>'
    )


def _spend_context(user: User, month: date, cost_centre: str) -> dict[str, Any]:
    """The spend chart of the CHART_MONTHS months up to `month` (one per currency), its table
    and the data static/js/usage-charts.js draws it from."""
    first = shift(month, 1 - CHART_MONTHS)
    charts, problems = spend_charts_for(user, first, month, cost_centre=cost_centre or None)
    return {
        "spend_first": f"{first:%Y-%m}",
        "spend_charts": charts,
        "spend_problems": problems,
        "chart_json": json.dumps({"tables": [chart.as_data() for chart in charts]}),
    }


def _filter_form(user: User, data: dict[str, str]) -> ChargebackFilterForm:
    values = {
        "period": data.get("period") or f"{current_month():%Y-%m}",
        "sort": data.get("sort") or "tenant",
        "cost_centre": data.get("cost_centre") or "",
    }
    return ChargebackFilterForm(values, cost_centres=_cost_centres(user))


@login_required
@require_GET
def statements(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A month's statements (this month so far by default) per tenant, with totals per cost
    centre; sorted and filtered on the server. Finance's start page."""
    _require_reader(request.user)
    return _statements_page(request, _filter_form(request.user, request.GET.dict()))


@login_required
@require_GET
def section(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """One section of the *Chargeback* page (`SECTIONS`) for the page's query: to htmx the
    fragment that takes its place, and without JavaScript the page with it written in."""
    _require_reader(request.user)
    if name not in SECTIONS:
        raise Http404(gettext("No such page."))
    form = _filter_form(request.user, request.GET.dict())

    def fragment() -> HttpResponse:
        data = form.cleaned_data
        context = _section_context(request, name, data["period"], data["cost_centre"])
        return render(request, f"billing/statements.html#{name}", context)

    # A bad month answers the page with the error beside its field, to htmx too.
    return section_response(
        alone=bool(request.htmx) and form.is_valid(),
        fragment=fragment,
        page=lambda: _statements_page(request, form, inline=name),
    )


@login_required
@require_POST
def close(request: AuthenticatedHttpRequest, period: str) -> HttpResponse:
    """Close a month (finance, admins): its statements become final. A refusal (a cluster's
    usage not complete yet, closed already) is shown on the month's page with its 409."""
    month = _month_in_url(period)
    _require_reader(request.user)
    try:
        closed = period_close(actor=request.user, month=month)
    except Conflict as error:
        form = _filter_form(request.user, {"period": period})
        return _statements_page(request, form, status=error.status, close_error=error.message)
    count = closed.statements.count()
    messages.success(
        request,
        ngettext(
            "%(month)s is closed: %(count)d statement is final.",
            "%(month)s is closed: %(count)d statements are final.",
            count,
        )
        % {"month": f"{month:%Y-%m}", "count": count},
    )
    return redirect(f"{reverse('billing:statements')}?period={month:%Y-%m}")


@login_required
@require_POST
def reopen(request: AuthenticatedHttpRequest, period: str) -> HttpResponse:
    """Reopen a closed month (admins, with a reason): its statements are provisional again."""
    month = _month_in_url(period)
    _require_reader(request.user)
    if not request.user.is_portal_admin:
        raise PermissionDenied(gettext("Only admins reopen a closed month."))
    reopen_form = PeriodReopenForm(request.POST)
    status = 400
    if reopen_form.is_valid():
        try:
            period_reopen(
                actor=request.user, month=month, reason=reopen_form.cleaned_data["reason"]
            )
        except (ValidationFailed, Conflict) as error:
            form_add_error(reopen_form, error)
            status = error.status
        else:
            messages.success(
                request,
                gettext("%(month)s is open again: its statements are provisional.")
                % {"month": f"{month:%Y-%m}"},
            )
            return redirect(f"{reverse('billing:statements')}?period={month:%Y-%m}")
    form = _filter_form(request.user, {"period": period})
    return _statements_page(request, form, status=status, reopen_form=reopen_form)


# One statement


def _quantity_text(line: LineView) -> str:
    return hours_text(line.quantity)


@login_required
@require_GET
def statement(request: AuthenticatedHttpRequest, statement_id: str) -> HttpResponse:
    """A statement's lines (the first PAGE_LINES; the CSV has them all) and its history."""
    _require_reader(request.user)
    view = statement_for(request.user, statement_id)
    shown = list(statement_lines(view, stop=PAGE_LINES + 1))
    lines = [(line, _quantity_text(line)) for line in shown[:PAGE_LINES]]
    context = {
        "statement": view,
        "lines": lines,
        "cut": len(shown) > PAGE_LINES,
        "page_lines": PAGE_LINES,
        "used_gpu_hours": hours_text(sum((line.used_gpu_hours for line, _ in lines), Decimal(0))),
        "idle_cost": sum((line.idle_cost or Decimal(0) for line, _ in lines), Decimal("0.00")),
        "history": statement_history(view),
        # The running month's statement shows the budget's burn-down beside it.
        "budget_panel": BudgetPanel(view.tenant) if view.month == current_month() else None,
    }
    return render(request, "billing/statement.html", context)


@login_required
@require_GET
def statement_download(
    request: AuthenticatedHttpRequest, statement_id: str, fmt: str
) -> HttpResponseBase:
    """The statement's lines as CSV (streamed) or XLSX."""
    _require_reader(request.user)
    if fmt not in downloads.FORMATS:
        raise Http404
    return downloads.statement_download(statement_for(request.user, statement_id), fmt)


# Rate cards


@dataclass
class RateRow:
    card: RateCard
    status: str  # "in effect", "upcoming" or "superseded"


def _rate_rows(today: date) -> list[RateRow]:
    """Every card, marked in effect (the newest started one of its model and backend), upcoming
    or superseded."""
    rows = []
    current: set[tuple[int, int | None]] = set()
    newest_first = sorted(rate_cards(), key=lambda card: (card.effective_from, card.pk))[::-1]
    for card in newest_first:
        key = (card.gpu_model_id, card.backend_id)
        if card.effective_from > today:
            status = "upcoming"
        elif key in current:
            status = "superseded"
        else:
            status = "in effect"
            current.add(key)
        rows.append(RateRow(card, status))
    return sorted(
        rows,
        key=lambda row: (
            row.card.gpu_model.name,
            row.card.backend.name if row.card.backend else "",
            -row.card.effective_from.toordinal(),
        ),
    )


@login_required
def rates(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every rate card, for everyone signed in; finance and admins add new ones here."""
    user = request.user
    if request.method == "POST" and not _may_close(user):
        raise PermissionDenied(gettext("Only finance and admins set prices."))
    context = {
        "rows": _rate_rows(datetime.now(UTC).date()),
        "may_price": _may_close(user),
    }

    def save(data: dict[str, Any]) -> RateCard:
        return rate_card_create(actor=user, **data)

    def success(card: Any) -> HttpResponse:
        messages.success(
            request,
            gettext("%(model)s: %(price)s %(currency)s per GPU-eq-hour from %(date)s.")
            % {
                "model": card.gpu_model.name,
                "price": card.price_per_gpu_eq_hour,
                "currency": card.currency,
                "date": date_format(card.effective_from),
            },
        )
        return redirect("billing:rates")

    return form_page(
        request,
        form=RateCardForm(request.POST if request.method == "POST" else None),
        template="billing/rates.html",
        context=context,
        save=save,
        success=success,
    )
