from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.utils.cache import patch_vary_headers
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from portal.core import cells
from portal.core.filters import AuditEventFilter
from portal.core.health import readiness_problems
from portal.core.home import home_panel_render, panel_for, panels_for
from portal.core.http import AuthenticatedHttpRequest, envelope_json
from portal.core.metrics import metrics_allowed
from portal.core.middleware import is_api_request
from portal.core.models import AuditEvent
from portal.core.navigation import persona_of, start_url_for
from portal.core.pages import error_page
from portal.core.pagination import BoundedPaginator
from portal.core.parsers import RequestTooLarge, too_large_message
from portal.core.selectors import audit_events_for

AUDIT_PER_PAGE = 50


# What `never_cache` writes, as one header: no cache keeps an answer about this process.
_NOT_KEPT = {"Cache-Control": "max-age=0, no-cache, no-store, must-revalidate, private"}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving; nothing else is checked. Asked every few seconds
    by each probe: its no-cache header is written as it is, not patched in."""
    return JsonResponse({"status": "ok"}, headers=_NOT_KEPT)


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: the database and (when configured) Redis answer. 503 names what fails."""
    problems = readiness_problems()
    if problems:
        return JsonResponse(
            {"status": "unavailable", "failing": sorted(problems), "problems": problems},
            status=503,
        )
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        raise Http404
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


def start(request: HttpRequest) -> HttpResponse:
    """`/`: each persona's own start page, or the login page."""
    if not request.user.is_authenticated:
        return redirect("accounts:login")
    return redirect(start_url_for(request.user))


@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every persona's home: the title of each panel the apps registered for the user's
    persona, each loaded on its own by `home_panel` (`portal.core.home`)."""
    return render(request, "core/home.html", {"panels": panels_for(persona_of(request.user))})


@login_required
def home_panel(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """One panel of the user's Home: to htmx the card that takes its place on the Home, and
    without JavaScript a page of its own. Another persona's panel is not found."""
    panel = panel_for(persona_of(request.user), name)
    if panel is None:
        raise Http404
    rendered = home_panel_render(request, request.user, panel)
    if request.htmx:
        response = render(request, "core/home.html#panel", {"panel": rendered})
    else:
        response = render(request, "core/home.html", {"panels": [rendered], "one_panel": True})
    # The same URL answers a fragment or a page: a cache must tell them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response


# Django's error handlers. Under /api/ they answer the JSON error envelope (a route that does not
# exist, a body Django refuses, anything a view let escape); every other path keeps its page.


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not is_api_request(request):
        return error_page(
            request,
            status=400,
            title=_("Bad request"),
            message=_("The request could not be understood."),
        )
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
        return envelope_json(
            status=RequestTooLarge.status_code,
            code=RequestTooLarge.default_code,
            message=too_large_message(limit),
        )
    if isinstance(exception, TooManyFieldsSent | TooManyFilesSent):
        return envelope_json(
            status=400,
            code="too_many_fields",
            message=_("The request has more fields or files than this API accepts."),
        )
    return envelope_json(
        status=400, code="bad_request", message=_("The request could not be understood.")
    )


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return envelope_json(
            status=403, code="permission_denied", message=_("You may not do this here.")
        )
    return error_page(
        request, status=403, title=_("Not allowed"), message=_("You may not do this here.")
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return envelope_json(
            status=404,
            code="not_found",
            message=_("There is nothing here, or nothing you have access to."),
        )
    return error_page(
        request,
        status=404,
        title=_("Not found"),
        message=_("There is nothing here, or nothing you have access to."),
    )


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        # No details: the exception is in the server's log (django.request), under this id.
        request_id = getattr(request, "request_id", "") or _("none")
        return envelope_json(
            status=500,
            code="server_error",
            message=_(
                "Something went wrong on our side. If it persists, report it with "
                "request id %(request_id)s."
            )
            % {"request_id": request_id},
        )
    # Rendered without the request context: the failure may be in a context processor.
    body = loader.get_template("errors/500.html").render(
        {"request_id": getattr(request, "request_id", "")}
    )
    return HttpResponse(body, status=500)


@login_required
def audit_log(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The audit log each persona may see, filtered and paginated on the server."""
    events = AuditEventFilter(
        request.GET or None, queryset=audit_events_for(request.user), request=request
    )
    page = BoundedPaginator(events.qs, AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    context = {"form": events.form, "page": page, "rows": cells.rows(page, _audit_row)}
    template = "core/audit.html#audit-table" if request.htmx else "core/audit.html"
    return render(request, template, context)


def _audit_row(event: AuditEvent) -> str:
    """One event's `<tr>` in the audit log (see `portal.core.cells`)."""
    actor = (
        f'<span translate="no">{cells.text(event.actor_name)}</span>'
        if event.actor_name
        else cells.text(_("system"))
    )
    changes = "".join(
        f'<div translate="no"><strong>{cells.text(field)}</strong>: '
        f"{cells.text('∅' if before is None else before)} → "
        f"{cells.text('∅' if after is None else after)}</div>"
        for field, before, after in event.change_rows
    )
    if event.comment:
        changes += f'<div class="help">“{cells.text(_(event.comment))}”</div>'
    tenant = cells.text(event.tenant.slug) if event.tenant is not None else "—"
    source = cells.text(event.source_ip or "")
    return (
        f"<tr><td>{cells.when(event.at)}</td><td>{actor}</td>"
        f"<td><code>{cells.text(event.action)}</code></td>"
        f'<td translate="no">{cells.text(event.target_name)} '
        f"<small>{cells.text(event.target_type)}:{cells.text(event.target_id)}</small></td>"
        f"<td>{tenant}</td><td>{changes}</td>"
        f"<td><small>{source} {cells.truncated(event.request_id, 12)}</small></td></tr>"
    )
