"""Request pages: the request form with its live preview, My requests, extending an
allocation, the lead's approvals queue (requests and extensions) and the admin's view of every
request. Writes go through allocations.services."""

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.allocations import services
from portal.allocations.filters import GpuRequestExtensionFilter, GpuRequestFilter
from portal.allocations.forms import DecisionForm, ExtendForm, GpuRequestForm
from portal.allocations.models import (
    HOLDING_STATES,
    ExtensionState,
    GpuRequest,
    GpuRequestExtension,
    Purpose,
    RequestState,
)
from portal.allocations.page_rows import (
    all_requests_row,
    approvals_row,
    extension_approvals_row,
    my_requests_row,
)
from portal.allocations.selectors import (
    approvals_queue_for,
    extension_for,
    extensions_queue_for,
    gpu_request_for,
    gpu_request_preview,
    gpu_requests_for,
    gpu_requests_of,
    pending_extension_of,
    pending_extensions_by_request,
    quota_left_for,
    with_costs,
    with_pending_extension_of_each,
    with_waiting,
)
from portal.catalog.models import Offering
from portal.core import cells
from portal.core.confirm import Question, confirm_page, confirmed, safe_next
from portal.core.errors import (
    ApplicationError,
    Conflict,
    InvalidTransition,
    NotFound,
    PolicyRefused,
    ValidationFailed,
)
from portal.core.home import prefill
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_add_error, polled_page, section_response
from portal.core.pagination import BoundedPaginator
from tenants.access import Access, tenant_for, tenant_ids_of, tenants_where
from tenants.models import MemberRole, Tenant, TenantState

PER_PAGE = 25
EXTENSIONS_SHOWN = 50  # on a request's page, newest first


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
    # "Request again" links and, without JavaScript, "Show this tenant's GPUs" come back here
    # with the form's values.
    form = GpuRequestForm(
        request.POST or None,
        initial=prefill(request.GET, GpuRequestForm.base_fields),
        tenants=tenants,
        offerings=offerings_requestable(),
    )
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
                        messages.success(
                            request, _("Request %(id)s is approved.") % {"id": gpu_request.pk}
                        )
                    else:
                        messages.info(
                            request,
                            _("Request %(id)s is waiting for a lead's approval.")
                            % {"id": gpu_request.pk},
                        )
                    return redirect("allocations:mine")
    return render(request, "allocations/request_form.html", {"form": form}, status=status)


@login_required
def request_offerings(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The offering select's options for the tenant the form has chosen: the select follows the
    tenant (htmx). Once swapped in, a change on the select refreshes the form's preview."""
    tenants = tenants_requestable(request)
    slug = request.GET.get("tenant", "")  # empty: the first of them, as the form starts
    if not tenants.exists() or (slug and not tenants.filter(slug=slug).exists()):
        raise Http404
    form = GpuRequestForm(request.GET, tenants=tenants, offerings=offerings_requestable())
    response = render(request, "allocations/_offering_select.html#options", {"form": form})
    response["HX-Trigger-After-Swap"] = json.dumps({"change": {"target": "#id_offering"}})
    return response


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
    requests = gpu_requests_of(request.user)
    page = BoundedPaginator(with_pending_extension_of_each(requests), PER_PAGE).get_page(
        request.GET.get("page")
    )
    rows: list[GpuRequest] = with_waiting(with_costs(list(page.object_list), lambda row: row))
    for row in rows:
        row.pending_extension = pending_extension_of(row)  # type: ignore[attr-defined]
    page.object_list = rows
    # Pending: one shown on this page (no query), else one on another page.
    waiting = (
        any(
            row.state == RequestState.PENDING or row.pending_extension  # type: ignore[attr-defined]
            for row in rows
        )
        or requests.filter(state=RequestState.PENDING).exists()
    )
    context = {
        "page": page,
        "rows": cells.rows(page.object_list, my_requests_row(request)),
        "waiting": waiting,
    }
    return polled_page(request, "allocations/mine.html", "requests-table", context, moving=waiting)


def _with_pending_extensions(rows: list[GpuRequest]) -> None:
    """Set `.pending_extension` on each row: the extension waiting for a lead, or None."""
    waiting = pending_extensions_by_request(rows)
    for row in rows:
        row.pending_extension = waiting.get(row.pk)  # type: ignore[attr-defined]


def _back(request: AuthenticatedHttpRequest, default: str) -> HttpResponse:
    back = request.POST.get("next", "")
    return redirect(back if back.startswith("/") and not back.startswith("//") else default)


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
    """approve, reject, cancel, release or revoke one request, then go back (extending has
    its own page: `extend`)."""
    if action not in services.TRANSITIONS or action == "extend":
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
    decision = DecisionForm(request.POST)
    decision.is_valid()
    try:
        done = services.gpu_request_transition(
            actor=request.user,
            gpu_request=gpu_request,
            action=action,
            comment=decision.cleaned_data.get("comment", ""),
        )
    except InvalidTransition:
        # A second confirmed submission that raced the first: it ended once.
        gpu_request.refresh_from_db()
        if _ENDS.get(action) != gpu_request.state:
            raise
        done = gpu_request
    messages.success(
        request,
        _("Request %(id)s is %(state)s.") % {"id": done.pk, "state": done.get_state_display()},
    )
    return redirect(back)


@login_required
@require_http_methods(["GET", "POST"])
def extend(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """More time on an allocation: at once within the tenant's policy; beyond it, with a
    reason, an extension that waits for a lead. A refusal shows the form again with the error
    beside its field (and asks for the reason when a lead must decide)."""
    gpu_request = gpu_request_for(request.user, pk)
    form = ExtendForm(request.POST or None)
    status = 200
    needs_reason = False
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                done = services.gpu_request_extend(
                    actor=request.user,
                    gpu_request=gpu_request,
                    hours=form.cleaned_data["hours"],
                    reason=form.cleaned_data["reason"],
                )
            except NotFound:
                raise
            except ApplicationError as error:
                form_add_error(form, error)
                status = error.status
                needs_reason = isinstance(error, PolicyRefused)
            else:
                _extended_message(request, done, form.cleaned_data["hours"])
                return _back(request, "allocations:mine")
    _with_pending_extensions([gpu_request])
    context = {
        "gpu_request": gpu_request,
        "form": form,
        "needs_reason": needs_reason,
        "holding": gpu_request.state in HOLDING_STATES,
        "next": request.POST.get("next") or request.GET.get("next", ""),
    }
    return render(request, "allocations/extend.html", context, status=status)


def _extended_message(request: AuthenticatedHttpRequest, done: GpuRequest, hours: int) -> None:
    if done.extension_pending is not None:
        messages.info(
            request,
            ngettext(
                "Extending request %(id)s by %(hours)s hour is waiting for a lead.",
                "Extending request %(id)s by %(hours)s hours is waiting for a lead.",
                hours,
            )
            % {"id": done.pk, "hours": hours},
        )
    else:
        messages.success(
            request,
            ngettext(
                "Request %(id)s is extended by %(hours)s hour.",
                "Request %(id)s is extended by %(hours)s hours.",
                hours,
            )
            % {"id": done.pk, "hours": hours},
        )


EXTENSION_DONE: dict[str, Any] = {
    ExtensionState.APPROVED: gettext_lazy(
        "Extension %(id)s is approved: request %(request)s ends later."
    ),
    ExtensionState.REJECTED: gettext_lazy("Extension %(id)s is rejected."),
    ExtensionState.CANCELLED: gettext_lazy("Extension %(id)s is cancelled."),
}


@login_required
@require_POST
def extension_decide(request: AuthenticatedHttpRequest, pk: int, action: str) -> HttpResponse:
    """approve or reject a pending extension (from Approvals), or cancel one's own (from My
    requests), then go back; a conflict is told on the page it came from."""
    if action not in services.EXTENSION_DECISIONS:
        raise Http404
    extension = extension_for(request.user, pk)
    decision = DecisionForm(request.POST)
    decision.is_valid()
    default = "allocations:mine" if action == "cancel" else "allocations:approvals"
    try:
        done = services.gpu_request_extension_transition(
            actor=request.user,
            extension=extension,
            action=action,
            comment=decision.cleaned_data.get("comment", ""),
        )
    except (Conflict, ValidationFailed) as error:
        # Decided meanwhile, the allocation ended, or the quota or maximum no longer fit: told
        # on the page the decision came from. Not allowed at all: the error page (403).
        messages.error(
            request,
            _("Extension %(id)s: %(problem)s") % {"id": extension.pk, "problem": error.message},
        )
        return _back(request, default)
    messages.success(
        request, EXTENSION_DONE[done.state] % {"id": done.pk, "request": done.request_id}
    )
    return _back(request, default)


def _require_approver(request: AuthenticatedHttpRequest) -> QuerySet[GpuRequest]:
    # The tenants led are the user's roles, read once per request (no query of their own).
    if not request.user.is_portal_admin and not tenant_ids_of(request.user, [MemberRole.LEAD]):
        raise Http404
    return approvals_queue_for(request.user)


def _page_link(request: AuthenticatedHttpRequest, param: str, number: int) -> str:
    query = request.GET.copy()
    query[param] = str(number)
    return f"?{query.urlencode()}"


@login_required
def approvals(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A lead's queue in their tenants: pending requests, each with the quota left for its
    model; filter by tenant, oldest first. The pending extensions of allocations load after
    it (`approvals_extensions`)."""
    return _approvals_page(request)


def _approvals_page(
    request: AuthenticatedHttpRequest, *, extensions_inline: bool = False
) -> HttpResponse:
    queue = GpuRequestFilter(request.GET, queryset=_require_approver(request), request=request)
    page = BoundedPaginator(queue.qs, PER_PAGE).get_page(request.GET.get("page"))
    rows: list[GpuRequest] = list(page.object_list)
    left = quota_left_for(rows)
    for row in rows:
        row.quota_left = left.get((row.tenant_id, row.gpu_model_id))  # type: ignore[attr-defined]
    page.object_list = rows
    extensions_url = reverse("allocations:approvals-extensions")
    context = {
        "page": page,
        "rows": cells.rows(rows, approvals_row(request, request.user)) if rows else "",
        "filters": queue.form,
        "extensions_inline": extensions_inline,
        "extensions_url": f"{extensions_url}?{request.GET.urlencode()}",
    }
    if extensions_inline:
        context |= _extensions_context(request)
    return render(request, "allocations/approvals.html", context)


def _extensions_context(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    """The pending extensions in the caller's queue, filtered as the page's requests."""
    waiting = GpuRequestExtensionFilter(
        request.GET, queryset=extensions_queue_for(request.user), request=request
    )
    extensions = BoundedPaginator(waiting.qs, PER_PAGE).get_page(request.GET.get("extensions_page"))
    pending: list[GpuRequestExtension] = list(extensions.object_list)
    left = quota_left_for([extension.request for extension in pending])
    for extension in pending:
        allocation = extension.request
        extension.quota_left = left.get((allocation.tenant_id, allocation.gpu_model_id))  # type: ignore[attr-defined]
    extensions.object_list = pending
    writer = extension_approvals_row(request, request.user) if pending else None
    return {
        "extensions": extensions,
        "extension_rows": cells.rows(pending, writer) if writer else "",
        "extensions_previous": _page_link(
            request, "extensions_page", extensions.previous_page_number()
        )
        if extensions.has_previous()
        else "",
        "extensions_next": _page_link(request, "extensions_page", extensions.next_page_number())
        if extensions.has_next()
        else "",
    }


@login_required
@require_GET
def approvals_extensions(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The pending extensions of the *Approvals* page, for its query: to htmx the section that
    takes its place, and without JavaScript the page with it written in."""

    def fragment() -> HttpResponse:
        _require_approver(request)
        return render(
            request, "allocations/approvals.html#extensions", _extensions_context(request)
        )

    return section_response(
        alone=bool(request.htmx),
        fragment=fragment,
        page=lambda: _approvals_page(request, extensions_inline=True),
    )


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
        messages.success(
            request,
            _("Approved %(count)s: %(ids)s.")
            % {"count": len(approved), "ids": ", ".join(approved)},
        )
    for reason in refused:
        messages.error(request, _("Not approved %(reason)s") % {"reason": reason})
    if not approved and not refused:
        messages.warning(request, _("Select the requests to approve."))
    return redirect("allocations:approvals")


@login_required
def all_requests(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every tenant's requests, for admins (and finance, read-only)."""
    if not request.user.sees_all_tenants:
        raise Http404
    requests = GpuRequestFilter(
        request.GET, queryset=gpu_requests_for(request.user), request=request
    )
    page = BoundedPaginator(requests.qs, PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_waiting(list(page.object_list))
    row = all_requests_row(request, revokes=request.user.is_portal_admin)
    context = {"page": page, "rows": cells.rows(page.object_list, row), "filters": requests.form}
    return render(request, "allocations/all.html", context)


@login_required
def request_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """One request or allocation: its numbers, its decision and, while it is not final, why it
    waits (a lead, its provisioning run, a pool that serves it)."""
    gpu_request = with_waiting(with_costs([gpu_request_for(request.user, pk)], lambda row: row))[0]
    # Its extensions, newest first, with who asked and who decided: one query. Whoever sees the
    # request sees its extensions (the same rules).
    extensions = gpu_request.extensions.select_related("requested_by", "decided_by")[
        :EXTENSIONS_SHOWN
    ]
    return render(
        request,
        "allocations/detail.html",
        {"gpu_request": gpu_request, "extensions": extensions},
    )
