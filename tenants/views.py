"""Tenant pages: each persona's start page, the admin's tenant list, and one tenant's page
with its members, quotas and quota requests. Every write goes through tenants.services."""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from portal.accounts.groups import tenant_group
from portal.accounts.models import MemberRole
from portal.core import cells
from portal.core.confirm import Question, confirm_page, confirmed
from portal.core.errors import InvalidTransition, QuotaExceeded, ValidationFailed
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import PageSection, form_add_error, form_page, section_response
from portal.core.pagination import BoundedPaginator
from portal.core.visibility import get_visible_or_404
from tenants import services
from tenants.access import Access, allows, role_in, tenant_for, tenants_led_by
from tenants.filters import TenantFilter
from tenants.forms import (
    DecisionForm,
    MemberForm,
    QuotaForm,
    QuotaRequestForm,
    StateForm,
    TenantCreateForm,
    TenantPolicyForm,
)
from tenants.models import QuotaRequest, Tenant
from tenants.page_rows import member_row, tenants_row
from tenants.pages import tenant_sections
from tenants.selectors import (
    memberships_of,
    quota_lines,
    quota_lines_for,
    quota_requests_for,
    quota_requests_pending,
    surplus_allocations,
    tenants_with_member_count,
    tenants_with_members,
)

TENANTS_PER_PAGE = 25
# The tenant page holds three inline forms; their own id prefixes keep ids (and the labels and
# error descriptions that point at them) unique on the page.
QUOTA_IDS, MEMBER_IDS, QUOTA_REQUEST_IDS = "quota_%s", "member_%s", "quota_request_%s"


def _require_admin(request: AuthenticatedHttpRequest) -> None:
    if not request.user.is_portal_admin:
        raise Http404


@login_required
def mine(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A developer's start page: their tenants, role, and GPU quota left in each."""
    memberships = list(memberships_of(request.user))
    lines = quota_lines_for(membership.tenant_id for membership in memberships)
    rows = [(membership, lines[membership.tenant_id]) for membership in memberships]
    return render(request, "tenants/mine.html", {"rows": rows})


@login_required
def team(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A lead's start page: the tenants they lead, with members and quotas."""
    tenants = list(tenants_with_members(tenants_led_by(request.user)))
    if not tenants:
        raise Http404
    lines = quota_lines_for(tenant.pk for tenant in tenants)
    rows = [(tenant, lines[tenant.pk]) for tenant in tenants]
    return render(request, "tenants/team.html", {"rows": rows})


@login_required
def finance(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every tenant by cost centre (finance and admins; linked from the chargeback page)."""
    if not request.user.sees_all_tenants:
        raise Http404
    tenants = Tenant.objects.visible_to(request.user).order_by("cost_centre", "slug")
    return render(request, "tenants/finance.html", {"tenants": tenants})


@login_required
def manage(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The admin's tenant list: search, filter by state, paginate; htmx swaps the table."""
    _require_admin(request)
    tenants = TenantFilter(
        request.GET,
        # The count only: a page of 50 tenants has hundreds of members, none of them shown.
        queryset=tenants_with_member_count(Tenant.objects.visible_to(request.user)),
        request=request,
    )
    page = BoundedPaginator(tenants.qs.order_by("slug"), TENANTS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    lines = quota_lines_for(tenant.pk for tenant in page)
    context: dict[str, Any] = {
        "page": page,
        "rows": cells.rows([(tenant, lines[tenant.pk]) for tenant in page], tenants_row()),
        "filters": tenants.form,
    }
    template = "tenants/manage.html#tenant-table" if request.htmx else "tenants/manage.html"
    return render(request, template, context)


@login_required
def tenant_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    form = TenantCreateForm(request.POST if request.method == "POST" else None)

    def created(tenant: Tenant) -> HttpResponse:
        messages.success(request, _("Tenant %(slug)s was created.") % {"slug": tenant.slug})
        return redirect("tenants:detail", slug=tenant.slug)

    return form_page(
        request,
        form=form,
        template="core/form.html",
        context={"title": _("New tenant"), "submit_label": _("Create tenant")},
        save=lambda data: services.tenant_create(actor=request.user, **data),
        success=created,
    )


def _page_facts(request: AuthenticatedHttpRequest, tenant: Tenant) -> dict[str, Any]:
    """What the tenant page and each of its sections know of the viewer."""
    user = request.user
    role = role_in(user, tenant)
    return {
        "tenant": tenant,
        "role": role,
        "is_admin": user.is_portal_admin,
        "sees_all_tenants": user.sees_all_tenants,
        "can_lead": allows(user, tenant, Access.LEAD, role=role),
        "can_ask_quota": allows(user, tenant, Access.ASK_QUOTA, role=role),
        "can_read_quota_requests": allows(user, tenant, Access.READ_QUOTA_REQUESTS, role=role),
        "members_from_provider": services.memberships_follow_identity_provider(),
    }


def _quotas(
    _request: AuthenticatedHttpRequest, tenant: Tenant, _page: dict[str, Any]
) -> dict[str, Any]:
    lines = quota_lines(tenant)
    return {
        "lines": lines,
        "over_quota": [
            (line, surplus_allocations(tenant, line.gpu_model.pk, line.quota))
            for line in lines
            if line.remaining < 0
        ],
        "quota_form": QuotaForm(auto_id=QUOTA_IDS),
    }


def _members(
    request: AuthenticatedHttpRequest, tenant: Tenant, page: dict[str, Any]
) -> dict[str, Any]:
    memberships = tenant.memberships.select_related("user").order_by("user__username")
    removable = page["can_lead"] and not page["members_from_provider"]
    row = member_row(tenant.slug, csrf_token=get_token(request) if removable else None)
    return {
        "member_rows": cells.rows(memberships, row),
        "tenant_groups": {
            role: tenant_group(settings.PORTAL_TENANT_GROUP, tenant.slug, role)
            for role in MemberRole.values
        },
        "member_form": MemberForm(auto_id=MEMBER_IDS),
    }


def _quota_requests(
    _request: AuthenticatedHttpRequest, tenant: Tenant, page: dict[str, Any]
) -> dict[str, Any]:
    readable = page["can_read_quota_requests"]
    return {
        "quota_requests": quota_requests_for(tenant)[:20] if readable else [],
        "quota_request_form": QuotaRequestForm(auto_id=QUOTA_REQUEST_IDS),
    }


# The page's own sections, after those of the apps above (`tenant_sections`), each loaded on
# its own: its title, and the context its fragment of tenants/detail.html needs.
type _SectionContext = Callable[[AuthenticatedHttpRequest, Tenant, dict[str, Any]], dict[str, Any]]
_OWN_SECTIONS: dict[str, tuple[Promise, _SectionContext]] = {
    "quotas": (gettext_lazy("GPU quotas"), _quotas),
    "members": (gettext_lazy("Members"), _members),
    "quota-requests": (gettext_lazy("Quota requests"), _quota_requests),
}


def _slots(
    request: AuthenticatedHttpRequest, page: dict[str, Any]
) -> list[tuple[PageSection, Callable[[], dict[str, Any]]]]:
    """Every section the viewer gets, in order, with what gives its context."""
    tenant: Tenant = page["tenant"]
    slots: list[tuple[PageSection, Callable[[], dict[str, Any]]]] = []
    for name in tenant_sections:
        section = tenant_sections.get(name)
        if section.shown(page):
            url = reverse("tenants:section", args=[tenant.slug, name])
            slot = PageSection(
                name,
                section.template,
                section.title,
                inline=section.title is None,
                url=url,
                assets=section.assets,
            )
            slots.append((slot, functools.partial(section.context, tenant)))
    for name, (title, context) in _OWN_SECTIONS.items():
        url = reverse("tenants:section", args=[tenant.slug, name])
        slot = PageSection(name, f"tenants/detail.html#{name}", title, inline=False, url=url)
        slots.append((slot, functools.partial(context, request, tenant, page)))
    return slots


def _detail_context(
    request: AuthenticatedHttpRequest, tenant: Tenant, *, inline: str = ""
) -> dict[str, Any]:
    """The page: its facts, each section loaded on its own but the links and `inline` (a
    refused form's, or the one asked for without JavaScript), which it writes itself."""
    page = _page_facts(request, tenant)
    shown, assets = [], []
    for slot, context in _slots(request, page):
        written = slot.inline or slot.name == inline
        if written:
            page |= context()
        shown.append(dataclasses.replace(slot, inline=written))
        if slot.assets:
            assets.append(slot.assets)
    return {**page, "sections": shown, "section_assets": assets}


def _loaded_alone(
    request: AuthenticatedHttpRequest, page: dict[str, Any], name: str
) -> tuple[PageSection, Callable[[], dict[str, Any]]]:
    """Section `name`, loaded on its own, with what gives its context; not found when the
    viewer does not get that section, or it is a link (in the page, nowhere else)."""
    for slot, context in _slots(request, page):
        if slot.name == name and not slot.inline:
            return slot, context
    raise Http404


def _section_context(
    request: AuthenticatedHttpRequest, tenant: Tenant, name: str
) -> tuple[str, dict[str, Any]]:
    """The fragment of section `name` and its context (`_loaded_alone`)."""
    page = _page_facts(request, tenant)
    slot, context = _loaded_alone(request, page, name)
    return slot.template, page | context()


@login_required
def detail(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """One tenant: its policy, then each section (quotas with what is left, members, quota
    requests, and those of the apps above) loaded on its own, so the page shows at once."""
    tenant = tenant_for(request.user, slug)
    return render(request, "tenants/detail.html", _detail_context(request, tenant))


@login_required
@require_GET
def section(request: AuthenticatedHttpRequest, slug: str, name: str) -> HttpResponse:
    """One section of a tenant's page: to htmx the fragment that takes its place, and without
    JavaScript the page with that section written in it."""
    tenant = tenant_for(request.user, slug)

    def fragment() -> HttpResponse:
        template, context = _section_context(request, tenant, name)
        return render(request, template, context)

    def page() -> HttpResponse:
        _loaded_alone(request, _page_facts(request, tenant), name)  # or not found
        context = _detail_context(request, tenant, inline=name)
        return render(request, "tenants/detail.html", context)

    return section_response(alone=bool(request.htmx), fragment=fragment, page=page)


def _after_write(request: AuthenticatedHttpRequest, tenant: Tenant, fragment: str) -> HttpResponse:
    """htmx gets the refreshed fragment; a plain form post goes back to the tenant page."""
    if request.htmx:
        template, context = _section_context(request, tenant, fragment)
        return render(request, template, context)
    return redirect("tenants:detail", slug=tenant.slug)


def _form_failed(
    request: AuthenticatedHttpRequest,
    tenant: Tenant,
    fragment: str,
    form_name: str,
    form: Any,
    *,
    status: int = 400,
) -> HttpResponse:
    """The refused form with what was typed and each error beside its field: htmx swaps the
    fragment in place (it swaps 400, 409 and 422 answers, base.html); without htmx, the page."""
    if request.htmx:
        template, context = _section_context(request, tenant, fragment)
    else:
        template, context = "tenants/detail.html", _detail_context(request, tenant, inline=fragment)
    return render(request, template, {**context, form_name: form}, status=status)


@login_required
@require_POST
def quota_set(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request.user, slug, Access.ADMIN)
    form = QuotaForm(request.POST, auto_id=QUOTA_IDS)
    status = 400
    if form.is_valid():
        try:
            services.quota_set(
                actor=request.user,
                tenant=tenant,
                gpu_model=form.cleaned_data["gpu_model"],
                gpu_eq=form.cleaned_data["gpu_eq"],
                force=form.cleaned_data["force"],
            )
        except (ValidationFailed, QuotaExceeded) as error:
            form_add_error(form, error)
            status = error.status
        else:
            messages.success(
                request,
                _("Quota for %(model)s is set.") % {"model": form.cleaned_data["gpu_model"]},
            )
            return _after_write(request, tenant, "quotas")
    return _form_failed(request, tenant, "quotas", "quota_form", form, status=status)


@login_required
@require_POST
def member_add(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request.user, slug, Access.LEAD)
    form = MemberForm(request.POST, auto_id=MEMBER_IDS)
    if form.is_valid():
        user = form.cleaned_data["username"]
        services.membership_set(
            actor=request.user, tenant=tenant, user=user, role=form.cleaned_data["role"]
        )
        messages.success(
            request,
            _("%(username)s is a %(role)s now.")
            % {"username": user.username, "role": MemberRole(form.cleaned_data["role"]).label},
        )
        return _after_write(request, tenant, "members")
    return _form_failed(request, tenant, "members", "member_form", form)


@login_required
@require_POST
def member_remove(request: AuthenticatedHttpRequest, slug: str, username: str) -> HttpResponse:
    """Remove a member, once confirmed; removing one who is gone already changes nothing."""
    tenant = tenant_for(request.user, slug, Access.LEAD)
    if not tenant.memberships.filter(user__username=username).exists():
        messages.info(
            request,
            _("%(username)s is not a member of %(slug)s.")
            % {"username": username, "slug": tenant.slug},
        )
        return redirect("tenants:detail", slug=tenant.slug)
    if not confirmed(request):
        question = Question(
            title=_("Remove %(username)s from %(tenant)s?")
            % {"username": username, "tenant": tenant.name},
            message=_(
                "They lose access to the tenant at once: its GPUs, notebooks and namespace. "
                "A lead can add them again later."
            ),
            submit_label=_("Remove member"),
            cancel_url=reverse("tenants:detail", args=[tenant.slug]),
        )
        return confirm_page(request, question)
    services.membership_remove(actor=request.user, tenant=tenant, username=username)
    messages.success(
        request,
        _("%(username)s was removed from %(slug)s.") % {"username": username, "slug": tenant.slug},
    )
    return _after_write(request, tenant, "members")


@login_required
@require_POST
def quota_request_create(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request.user, slug, Access.ASK_QUOTA)
    form = QuotaRequestForm(request.POST, auto_id=QUOTA_REQUEST_IDS)
    status = 400
    if form.is_valid():
        try:
            services.quota_request_create(actor=request.user, tenant=tenant, **form.cleaned_data)
        except ValidationFailed as error:
            form_add_error(form, error)
            status = error.status
        else:
            messages.success(request, _("Your quota request was sent to the admins."))
            return _after_write(request, tenant, "quota-requests")
    return _form_failed(
        request, tenant, "quota-requests", "quota_request_form", form, status=status
    )


@login_required
@require_POST
def quota_request_decide(request: AuthenticatedHttpRequest, slug: str, pk: int) -> HttpResponse:
    tenant = tenant_for(request.user, slug, Access.ADMIN)
    quota_request = get_visible_or_404(QuotaRequest, request.user, pk=pk, tenant=tenant)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        raise ValidationFailed(
            _("Choose approve or reject."), fields={"decision": [_("Required.")]}
        )
    decide = (
        services.quota_request_approve
        if form.cleaned_data["decision"] == "approve"
        else services.quota_request_reject
    )
    decided = decide(
        actor=request.user, quota_request=quota_request, comment=form.cleaned_data["comment"]
    )
    messages.success(
        request,
        _("Quota request %(pk)s is %(state)s.")
        % {"pk": decided.pk, "state": decided.get_state_display()},
    )
    if request.POST.get("next") == "queue":
        return redirect("tenants:quota-queue")
    return _after_write(request, tenant, "quota-requests")


@login_required
def quota_queue(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The admin's queue of pending quota requests across tenants, oldest first."""
    _require_admin(request)
    page = BoundedPaginator(quota_requests_pending(), TENANTS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(request, "tenants/quota_queue.html", {"page": page})


@login_required
def tenant_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request.user, slug, Access.ADMIN)
    initial = {name: getattr(tenant, name) for name in services.TENANT_FIELDS}
    initial["auto_approve_gpu_eq"] = str(tenant.auto_approve_gpu_eq)
    form = TenantPolicyForm(request.POST if request.method == "POST" else None, initial=initial)

    def updated(_tenant: Tenant) -> HttpResponse:
        messages.success(request, _("Tenant %(slug)s was updated.") % {"slug": tenant.slug})
        return redirect("tenants:detail", slug=tenant.slug)

    return form_page(
        request,
        form=form,
        template="core/form.html",
        context={
            "title": _("Edit %(name)s") % {"name": tenant.name},
            "cancel_url": reverse("tenants:detail", args=[tenant.slug]),
        },
        save=lambda data: services.tenant_update(actor=request.user, tenant=tenant, **data),
        success=updated,
    )


def _state_question(tenant: Tenant, action: str) -> Question:
    cancel_url = reverse("tenants:detail", args=[tenant.slug])
    name = tenant.name
    if action == "suspend":
        return Question(
            title=_("Suspend tenant %(name)s?") % {"name": name},
            message=_(
                "Its allocations are revoked, its pending requests rejected and its notebooks "
                "stopped, and its team cannot request GPUs. Reactivating it later restores "
                "none of them."
            ),
            submit_label=_("Suspend tenant"),
            cancel_url=cancel_url,
            comment_label=_("Why (for the audit log)"),
        )
    if action == "reactivate":
        return Question(
            title=_("Reactivate tenant %(name)s?") % {"name": name},
            message=_("Its team can request GPUs and launch notebooks again."),
            submit_label=_("Reactivate tenant"),
            cancel_url=cancel_url,
            danger=False,
            comment_label=_("Why (for the audit log)"),
        )
    return Question(
        title=_("Archive tenant %(name)s?") % {"name": name},
        message=_(
            "Archiving ends the tenant: its namespace is deleted in every cluster, with every "
            "notebook, volume and object in it. This cannot be undone."
        ),
        submit_label=_("Archive and delete its namespaces"),
        cancel_url=cancel_url,
        typed=tenant.slug,
        comment_label=_("Why (for the audit log)"),
    )


@login_required
@require_POST
def tenant_state(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """Suspend, reactivate or archive, once confirmed (archive: by typing the slug). Asked
    again after it happened (a second click, a reload), it says so and changes nothing."""
    tenant = tenant_for(request.user, slug, Access.ADMIN)
    form = StateForm(request.POST)
    if not form.is_valid():
        raise ValidationFailed(_("Choose an action."), fields={"action": [_("Required.")]})
    action = form.cleaned_data["action"]
    if tenant.state != services.state_after(action):
        typed = tenant.slug if action == "archive" else ""
        if not confirmed(request, typed=typed):
            return confirm_page(request, _state_question(tenant, action))
        try:
            services.tenant_change_state(
                actor=request.user,
                tenant=tenant,
                action=action,
                comment=form.cleaned_data["comment"],
            )
        except InvalidTransition:
            tenant.refresh_from_db()
            if tenant.state != services.state_after(action):
                raise
            # A second submission that raced the first: it happened once, say so below.
        else:
            tenant.refresh_from_db()
            messages.success(
                request,
                _("Tenant %(slug)s is %(state)s.")
                % {"slug": tenant.slug, "state": tenant.get_state_display()},
            )
            return redirect("tenants:detail", slug=tenant.slug)
    messages.info(
        request,
        _("Tenant %(slug)s is %(state)s already.")
        % {"slug": tenant.slug, "state": tenant.get_state_display()},
    )
    return redirect("tenants:detail", slug=tenant.slug)
