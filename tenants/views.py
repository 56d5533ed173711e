from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from portal.core.http import AuthenticatedHttpRequest
from tenants.selectors import (
    memberships_of,
    tenants_led_by,
    tenants_visible_to,
    tenants_with_members,
)


@login_required
def mine(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A developer's start page: the tenants they work in and their role in each."""
    return render(request, "tenants/mine.html", {"memberships": memberships_of(request.user)})


@login_required
def team(request: AuthenticatedHttpRequest) -> HttpResponse:
    """A lead's start page: the tenants they lead, with their members."""
    tenants = list(tenants_with_members(tenants_led_by(request.user)))
    if not tenants:
        raise Http404
    return render(request, "tenants/team.html", {"tenants": tenants})


@login_required
def finance(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Finance's start page: every tenant by cost centre."""
    if not request.user.sees_all_tenants:
        raise Http404
    tenants = tenants_visible_to(request.user).order_by("cost_centre", "slug")
    return render(request, "tenants/finance.html", {"tenants": tenants})


@login_required
def manage(request: AuthenticatedHttpRequest) -> HttpResponse:
    """An admin's start page: every tenant with its state and member count."""
    if not request.user.is_portal_admin:
        raise Http404
    tenants = tenants_with_members(tenants_visible_to(request.user))
    return render(request, "tenants/manage.html", {"tenants": tenants})
