"""Request pages: the request form with its live preview, My requests, the lead's approvals
queue and the admin's view of every request. Writes go through allocations.services."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.allocations import services
from portal.allocations.filters import GpuRequestFilter
from portal.allocations.forms import DecisionForm, ExtendForm, GpuRequestForm
from portal.allocations.models import GpuRequest, Purpose, RequestState
from portal.allocations.selectors import (
    approvals_queue_for,
    gpu_request_for,
    gpu_request_preview,
    gpu_requests_for,
    with_costs,
)
from portal.catalog.models import Offering
from portal.core.confirm import Question, confirm_page, confirmed, safe_next
from portal.core.errors import ApplicationError, InvalidTransition, ValidationFailed
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_add_error, polled_page
from tenants.access import Access, tenant_for, tenants_led_by, tenants_where
from tenants.models import Tenant, TenantState

PER_PAGE = 25


def tenants_requestable(request: AuthenticatedHttpRequest) -> QuerySet[Tenant]:
    return tenants_where(request.user, Access.REQUEST).filter(state=TenantState.ACTIVE)


def offerings_requestable() -> QuerySet[Offering]:
    return Offering.objects.filter(enabled=True, gpu_model__enabled=True).select_related(
        "gpu_model", "backend"
    )


@login_required
def request_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Ask for GPUs; the decision comes at once (approved, waiting for a lead, or refused)."""
    tenants = tenants_requestable(request)
    if not tenants.exists() and not request.user.is_portal_admin:
        raise Http404
    form = GpuRequestForm(request.POST or None, tenants=tenants, offerings=offerings_requestable())
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                gpu_request = services.gpu_request_submit(
                    actor=request.user,
                    tenant=data["tenant"],
                    offering=data["offering"],
                    count=data["count"],
                    duration_hours=data["duration_hours"],
                    purpose=data["purpose"],
                    justification=data["justification"],
                )
            except ApplicationError as error:
                form_add_error(form, error)
                status = error.status
            else:
                if gpu_request.state == RequestState.REJECTED:
                    form.add_error("count", gpu_request.decision_comment)
                    status = 409
                else:
                    if gpu_request.state == RequestState.APPROVED:
                        messages.success(request, f"Request {gpu_request.pk} is approved.")
                    else:
                        messages.info(
                            request, f"Request {gpu_request.pk} is waiting for a lead's approval."
                        )
                    return redirect("allocations:mine")
    return render(request, "allocations/request_form.html", {"form": form}, status=status)


def request_preview_context(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    """What the request form's preview shows for the form's current values (also used by the
    notebook launch form): nothing until a tenant, an offering and numbers are readable, then
    the decision's path and numbers, or why the request would be refused as bad input."""
    context: dict[str, Any] = {"preview": None}
    params = request.GET
    offering = offerings_requestable().filter(slug=params.get("offering", "")).first()
    try:
        count = int(params.get("count") or 1)
        hours = int(params["duration_hours"]) if params.get("duration_hours") else None
        tenant = tenant_for(request.user, params.get("tenant", ""), Access.REQUEST)
    except (ValueError, ApplicationError):
        return context
    if offering is not None:
        try:
            context["preview"] = gpu_request_preview(
                user=request.user,
                tenant=tenant,
                offering=offering,
                count=count,
                duration_hours=hours,
                purpose=params.get("purpose") or Purpose.NOTEBOOK,
            )
        except ApplicationError as error:
            context["preview_error"] = error.message
    return context


@login_required
def request_preview(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The form's live preview: quota left after this request and the path it will take."""
    return render(
        request, "allocations/request_form.html#preview", request_preview_context(request)
    )


@login_required
def mine(request: AuthenticatedHttpRequest) -> HttpResponse:
    """My requests; while any is pending, htmx polls the table, then stops (HTTP 286)."""
    requests = gpu_requests_for(request.user).filter(requester=request.user)
    page = Paginator(requests, PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_costs(list(page.object_list), lambda row: row)
    waiting = requests.filter(state=RequestState.PENDING).exists()
    context = {"page": page, "waiting": waiting, "extend_form": ExtendForm()}
    return polled_page(request, "allocations/mine.html", "requests-table", context, moving=waiting)


# The transitions that end an allocation at once ask first (portal.core.confirm).
_ENDS = {"release": RequestState.RELEASED, "revoke": RequestState.REVOKED}


def end_question(gpu_request: GpuRequest, action: str, cancel_url: str) -> Question:
    """What to ask before `action` (release or revoke) ends the allocation `gpu_request`."""
    what = {
        "pk": gpu_request.pk,
        "gpus": f"{gpu_request.count} \N{MULTIPLICATION SIGN} {gpu_request.offering.name}",
        "tenant": gpu_request.tenant.slug,
    }
    if action == "release":
        return Question(
            title=_("Release allocation %(pk)s?") % what,
            message=_(
                "%(gpus)s in %(tenant)s goes back to the tenant's quota now, and "
                "the notebooks on it are stopped. To use GPUs again, request them again."
            )
            % what,
            submit_label=_("Release allocation"),
            cancel_url=cancel_url,
        )
    return Question(
        title=_("Revoke allocation %(pk)s?") % what,
        message=_(
            "%(gpus)s in %(tenant)s is taken from %(requester)s now, and the "
            "notebooks on it are stopped. This cannot be undone."
        )
        % {**what, "requester": gpu_request.requester.username},
        submit_label=_("Revoke allocation"),
        cancel_url=cancel_url,
    )


@login_required
@require_POST
def transition(request: AuthenticatedHttpRequest, pk: int, action: str) -> HttpResponse:
    """approve, reject, cancel, release, revoke or extend one request, then go back."""
    if action not in services.TRANSITIONS:
        raise Http404
    gpu_request = gpu_request_for(request.user, pk)
    back = safe_next(request, reverse("allocations:mine"))
    if action in _ENDS:
        if gpu_request.state == _ENDS[action]:
            # A second click or a reload: it happened once, nothing more to do.
            messages.info(
                request,
                _("Request %(pk)s is %(state)s already.")
                % {"pk": gpu_request.pk, "state": gpu_request.get_state_display()},
            )
            return redirect(back)
        if not confirmed(request):
            return confirm_page(request, end_question(gpu_request, action, back))
    hours = 0
    if action == "extend":
        form = ExtendForm(request.POST)
        if not form.is_valid():
            raise ValidationFailed("hours: extend by at least 1 hour.", fields={"hours": ["≥ 1"]})
        hours = form.cleaned_data["hours"]
    decision = DecisionForm(request.POST)
    decision.is_valid()
    try:
        done = services.gpu_request_transition(
            actor=request.user,
            gpu_request=gpu_request,
            action=action,
            comment=decision.cleaned_data.get("comment", ""),
            hours=hours,
        )
    except InvalidTransition:
        # A second confirmed submission that raced the first: it ended once.
        gpu_request.refresh_from_db()
        if _ENDS.get(action) != gpu_request.state:
            raise
        done = gpu_request
    messages.success(request, f"Request {done.pk} is {done.state}.")
    return redirect(back)


def _require_approver(request: AuthenticatedHttpRequest) -> QuerySet[GpuRequest]:
    queue = approvals_queue_for(request.user)
    if not request.user.is_portal_admin and not tenants_led_by(request.user).exists():
        raise Http404
    return queue


@login_required
def approvals(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A lead's queue of pending requests in their tenants: filter by tenant, oldest first."""
    queue = GpuRequestFilter(request.GET, queryset=_require_approver(request), request=request)
    page = Paginator(queue.qs, PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "allocations/approvals.html", {"page": page, "filters": queue.form})


@login_required
@require_POST
def approve_selected(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Approve several requests: each is its own decision, with its own quota check."""
    _require_approver(request)
    approved, refused = [], []
    for raw_id in request.POST.getlist("ids"):
        try:
            gpu_request = gpu_request_for(request.user, int(raw_id))
            services.gpu_request_approve(
                actor=request.user, gpu_request=gpu_request, comment=request.POST.get("comment", "")
            )
        except (ValueError, ApplicationError) as error:
            refused.append(f"{raw_id}: {getattr(error, 'message', error)}")
        else:
            approved.append(raw_id)
    if approved:
        messages.success(request, f"Approved {len(approved)}: {', '.join(approved)}.")
    for reason in refused:
        messages.error(request, f"Not approved {reason}")
    if not approved and not refused:
        messages.warning(request, "Select the requests to approve.")
    return redirect("allocations:approvals")


@login_required
def all_requests(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every tenant's requests, for admins (and finance, read-only)."""
    if not request.user.sees_all_tenants:
        raise Http404
    requests = GpuRequestFilter(
        request.GET, queryset=gpu_requests_for(request.user), request=request
    )
    page = Paginator(requests.qs, PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "allocations/all.html", {"page": page, "filters": requests.form})
