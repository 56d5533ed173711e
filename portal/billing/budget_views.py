"""The budget section of a tenant's page (and of its statement for the running month): the
burn-down chart with its table, and finance's form to set, change or remove the budget.

Leads, finance and admins see it; finance and admins write. Reads go through
portal.billing.budgets, writes through portal.billing.services.
"""

import json
from contextlib import suppress
from functools import cached_property
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.billing.budgets import BudgetStatus, budget_of, budget_status, budget_tenant
from portal.billing.forms import BudgetForm
from portal.billing.models import Budget
from portal.billing.services import budget_remove, budget_set
from portal.core.confirm import Question, confirm_page, confirmed
from portal.core.errors import ApplicationError, NotFound, PermissionDenied
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_add_error
from tenants.models import Tenant


class BudgetPanel:
    """What the section shows, read only when a template asks (developers see no budget, so
    their tenant page computes none)."""

    def __init__(self, tenant: Tenant, form: BudgetForm | None = None) -> None:
        self.tenant = tenant
        self._form = form

    @cached_property
    def budget(self) -> Budget | None:
        return budget_of(self.tenant)

    @cached_property
    def status(self) -> BudgetStatus | None:
        return budget_status(self.budget) if self.budget is not None else None

    @cached_property
    def chart(self) -> dict[str, Any]:
        """The burn-down for static/js/budget-chart.js: the same figures as the table."""
        status = self.status
        if status is None or status.problem:
            return {}
        return {
            "unit": status.unit_label,
            "budget": str(status.budget.amount),
            "month_end": status.month_end.isoformat(),
            "projected": str(status.projected),
            "days": [point.day.isoformat() for point in status.series],
            "spent": [str(point.spent) for point in status.series],
        }

    @property
    def chart_json(self) -> str:
        """The chart's figures for the figure's data attribute (htmx drops script elements from
        what it swaps in, so a json_script would not survive a change of the budget)."""
        return json.dumps(self.chart)

    @property
    def form(self) -> BudgetForm:
        if self._form is not None:
            return self._form
        budget = self.budget
        if budget is None:
            return BudgetForm()
        return BudgetForm(
            initial={
                "unit": budget.unit,
                "amount": budget.amount,
                "currency": budget.currency,
                "approval_above": budget.approval_above,
            }
        )


def budget_section_context(tenant: Tenant) -> dict[str, Any]:
    """The tenant page's budget section (portal.billing.apps registers it)."""
    return {"budget_panel": BudgetPanel(tenant)}


def _answer(
    request: AuthenticatedHttpRequest, tenant: Tenant, *, form: BudgetForm | None, status: int
) -> HttpResponse:
    """htmx gets the section again; a plain form goes back to the tenant page (or, refused,
    gets the section with the errors beside the fields)."""
    if request.htmx or status != 200:
        context = {"budget_panel": BudgetPanel(tenant, form), "tenant": tenant}
        return render(request, "billing/budget.html#budget", context, status=status)
    return redirect("tenants:detail", slug=tenant.slug)


def _writer_tenant(request: AuthenticatedHttpRequest, slug: str) -> Tenant:
    tenant = budget_tenant(request.user, slug)  # 404 for whoever may not read it
    if not (request.user.is_finance or request.user.is_portal_admin):
        raise PermissionDenied(gettext("Only finance and admins set budgets; leads read them."))
    return tenant


@login_required
@require_POST
def budget_save(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Set or change the tenant's budget (finance, admins)."""
    tenant = _writer_tenant(request, slug)
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            budget_set(actor=request.user, tenant=tenant, **form.cleaned_data)
        except ApplicationError as error:
            form_add_error(form, error)
            return _answer(request, tenant, form=form, status=error.status)
        messages.success(
            request, gettext("The budget of %(tenant)s is set.") % {"tenant": tenant.slug}
        )
        return _answer(request, tenant, form=None, status=200)
    return _answer(request, tenant, form=form, status=400)


@login_required
@require_POST
def budget_delete(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Remove the tenant's budget (finance, admins), once confirmed; with none (a second
    submission) it says so and changes nothing."""
    tenant = _writer_tenant(request, slug)
    if budget_of(tenant) is not None:
        if not confirmed(request):
            question = Question(
                title=_("Remove the budget of %(tenant)s?") % {"tenant": tenant.slug},
                message=_("Its spend is no longer compared with a budget and nobody is alerted."),
                submit_label=_("Remove budget"),
                cancel_url=reverse("tenants:detail", args=[tenant.slug]),
            )
            return confirm_page(request, question)
        with suppress(NotFound):  # a second submission that raced the first
            budget_remove(actor=request.user, tenant=tenant)
    messages.success(request, _("%(tenant)s has no budget any more.") % {"tenant": tenant.slug})
    return _answer(request, tenant, form=None, status=200)
