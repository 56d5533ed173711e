"""Notebook pages: My notebooks, the launch form with its live preview, a notebook's page with
its live state and events, and the actions. Writes go through workloads.services."""

from contextlib import suppress
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.allocations.selectors import with_costs
from portal.allocations.views import (
    offerings_requestable,
    request_preview_context,
    tenants_requestable,
)
from portal.core.confirm import Question, confirm_page, confirmed
from portal.core.errors import NotFound, ValidationFailed
from portal.core.home import prefill
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_page, polled_page
from portal.core.pagination import BoundedPaginator
from portal.workloads import services
from portal.workloads.filters import NotebookFilter
from portal.workloads.forms import LaunchForm
from portal.workloads.models import MOVING_STATES, Desired, Notebook, NotebookState
from portal.workloads.selectors import (
    allocation_for_launch,
    images_for_launch,
    launchable_allocations,
    notebook_for,
    notebook_runs,
    notebooks_for,
)

PER_PAGE = 25


@login_required
def notebooks(request: AuthenticatedHttpRequest) -> HttpResponse:
    """My notebooks (and, for leads and admins, their tenants'); polls while any is moving."""
    filters = NotebookFilter(request.GET, queryset=notebooks_for(request.user), request=request)
    visible = filters.qs
    if not filters.form.cleaned_data.get("state"):  # the page hides deleted ones unless asked
        visible = visible.exclude(state=NotebookState.DELETED)
    filters.form.fields["state"].choices = [("", _("all but deleted")), *NotebookState.choices]  # type: ignore[attr-defined]
    page = BoundedPaginator(visible, PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_costs(list(page.object_list), lambda notebook: notebook.allocation)
    moving = any(notebook.state in MOVING_STATES for notebook in page)
    context = {"page": page, "moving": moving, "filters": filters.form, "now": timezone.now()}
    return polled_page(
        request, "workloads/notebooks.html", "notebooks-table", context, moving=moving
    )


def _launch_form(request: AuthenticatedHttpRequest) -> LaunchForm:
    return LaunchForm(
        request.POST if request.method == "POST" else None,
        # "launch again" links fill in a recent notebook's setup
        initial=prefill(request.GET, LaunchForm.base_fields),
        tenants=tenants_requestable(request),
        offerings=offerings_requestable(),
        allocations=launchable_allocations(request.user),
        images=images_for_launch(),
    )


@login_required
def notebook_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Launch a notebook on an allocation, or request GPUs and launch in one go."""
    if not request.user.is_portal_admin and not tenants_requestable(request).exists():
        raise Http404  # finance and people in no tenant launch nothing
    form = _launch_form(request)

    def launch(data: dict[str, Any]) -> Notebook:
        return services.notebook_launch(
            actor=request.user,
            allocation_id=int(data["allocation"]) if data["allocation"] else None,
            tenant=data["tenant"].slug if data["tenant"] else "",
            offering=data["offering"].slug if data["offering"] else "",
            count=data["count"] or 1,
            duration_hours=data["duration_hours"],
            justification=data["justification"],
            image=data["image"],
            name=data["name"],
            cpu_cores=data["cpu_cores"],
            memory_gib=data["memory_gib"],
            workspace_gib=data["workspace_gib"],
        )

    def launched(notebook: Notebook) -> HttpResponse:
        messages.success(request, _("Notebook %(name)s is launching.") % {"name": notebook.name})
        return redirect("workloads:detail", pk=notebook.pk)

    return form_page(
        request, form=form, template="workloads/launch.html", context={},
        save=launch, success=launched,
    )  # fmt: skip


@login_required
def notebook_preview(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The launch form's live preview: the chosen allocation, or what a new request would do."""
    context: dict[str, Any] = {"allocation": None}
    chosen = request.GET.get("allocation", "")
    if chosen.isdigit():
        with suppress(NotFound):  # another user's: no preview, as if it did not exist
            context["allocation"] = allocation_for_launch(request.user, int(chosen))
    else:
        context |= request_preview_context(request)
    return render(request, "workloads/launch.html#preview", context)


@login_required
def notebook_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """One notebook; while it is moving, htmx polls its state (asking for a fresh read of its
    pod at most every few seconds) and stops with 286 once it settles."""
    notebook = notebook_for(request.user, pk)
    context = {
        "notebook": notebook,
        "is_owner": notebook.owner_id == request.user.pk,
        "namespace": notebook.cluster.namespace_for(notebook.tenant.slug),
        "runs": notebook_runs(notebook, limit=5),
    }
    if request.htmx:  # a page watching the notebook: read its pod now
        services.notebook_observe_request(notebook=notebook)
    return polled_page(request, "workloads/detail.html", "state", context, moving=notebook.moving)


@login_required
@require_POST
def notebook_action(request: AuthenticatedHttpRequest, pk: int, action: str) -> HttpResponse:
    """start, stop or snooze, then back to the notebook's page (or where the form said)."""
    notebook = notebook_for(request.user, pk)
    back = request.POST.get("next", "")
    if action == "stop" and notebook.desired == Desired.STOPPED:
        if notebook.state != NotebookState.FAILED:  # a second click: it is stopping already
            messages.info(
                request,
                _("Notebook %(name)s is %(state)s already.")
                % {"name": notebook.name, "state": notebook.get_state_display()},
            )
            return _back(notebook, back)
    elif action == "stop" and not confirmed(request):
        question = Question(
            title=_("Stop notebook %(name)s?") % {"name": notebook.name},
            message=_(
                "Its server stops and what runs in it now is lost; its workspace stays, and "
                "you can start it again while its allocation lasts."
            ),
            submit_label=_("Stop notebook"),
            cancel_url=reverse("workloads:list")
            if back == "list"
            else reverse("workloads:detail", args=[notebook.pk]),
        )
        return confirm_page(request, question)
    if action == "start":
        services.notebook_start(actor=request.user, notebook=notebook)
        messages.success(request, _("Notebook %(name)s is starting.") % {"name": notebook.name})
    elif action == "stop":
        services.notebook_stop(actor=request.user, notebook=notebook)
        messages.success(
            request,
            _("Notebook %(name)s is stopping; its workspace stays.") % {"name": notebook.name},
        )
    elif action == "snooze":
        services.notebook_snooze(actor=request.user, notebook=notebook)
        messages.success(
            request,
            _("Notebook %(name)s will not be stopped as idle for now.") % {"name": notebook.name},
        )
    else:
        raise NotFound(_("There is no action %(action)r.") % {"action": action})
    return _back(notebook, back)


def _back(notebook: Notebook, back: str) -> HttpResponse:
    if back == "list":
        return redirect("workloads:list")
    return redirect("workloads:detail", pk=notebook.pk)


@login_required
def notebook_delete(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Asks whether to keep the workspace, then deletes."""
    notebook = notebook_for(request.user, pk)
    context = {"notebook": notebook, "cancel_url": reverse("workloads:detail", args=[pk])}
    if request.method != "POST":
        return render(request, "workloads/delete_confirm.html", context)
    if notebook.desired == Desired.DELETED and notebook.state != NotebookState.FAILED:
        # A second submission: it is being deleted once.
        messages.info(
            request,
            _("Notebook %(name)s is %(state)s already.")
            % {"name": notebook.name, "state": notebook.get_state_display()},
        )
        return redirect("workloads:list")
    keep = request.POST.get("keep_workspace", "")
    if keep not in ("yes", "no"):
        context["error"] = ValidationFailed.on(
            "keep_workspace", _("Say whether to keep the workspace.")
        ).message
        return render(request, "workloads/delete_confirm.html", context, status=400)
    services.notebook_delete(actor=request.user, notebook=notebook, keep_workspace=keep == "yes")
    done = (
        _("Notebook %(name)s is being deleted; its workspace is kept.")
        if keep == "yes"
        else _("Notebook %(name)s is being deleted; its workspace is deleted.")
    )
    messages.success(request, done % {"name": notebook.name})
    return redirect("workloads:list")
