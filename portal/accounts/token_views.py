"""The API tokens page: each signed-in user's own personal tokens, a form that issues one and
shows it once, and revoking. Writes go through accounts.tokens."""

from contextlib import suppress
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache

from portal.accounts.forms import ApiTokenForm
from portal.accounts.tokens import (
    IssuedToken,
    api_token_create,
    api_token_default_days,
    api_token_expiry_choices,
    api_token_for,
    api_token_revoke,
    api_tokens_of,
)
from portal.core.confirm import Question, confirm_page, confirmed
from portal.core.errors import InvalidTransition
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_page
from portal.core.pagination import BoundedPaginator

PER_PAGE = 25
TEMPLATE = "accounts/tokens.html"


def _form(request: AuthenticatedHttpRequest, *, bound: bool) -> ApiTokenForm:
    return ApiTokenForm(
        request.POST if bound else None,
        choices=api_token_expiry_choices(),
        default=api_token_default_days(),
    )


def _context(request: AuthenticatedHttpRequest, **extra: Any) -> dict[str, Any]:
    page = BoundedPaginator(api_tokens_of(request.user), PER_PAGE).get_page(request.GET.get("page"))
    return {"page": page, **extra}


@login_required
@never_cache  # the answer to a create holds the token: no cache may keep it
def tokens(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The user's tokens; a POST issues one and shows it in this answer only (a reload shows
    the list without it)."""
    if request.htmx and request.method == "GET":
        return render(request, f"{TEMPLATE}#tokens-table", _context(request))

    def show_once(issued: IssuedToken) -> HttpResponse:
        context = _context(request, issued=issued, form=_form(request, bound=False))
        return render(request, TEMPLATE, context)

    return form_page(
        request,
        form=_form(request, bound=request.method == "POST"),
        template=TEMPLATE,
        context=_context(request),
        save=lambda data: api_token_create(
            actor=request.user, name=data["name"], expires_in_days=data["expires_in_days"]
        ),
        success=show_once,
    )


@login_required
def token_revoke(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Asks first (portal.core.confirm: a page, or a dialog for htmx), then revokes on the POST
    that carries the confirmation. Someone else's token is 404; a token revoked already is
    left as it is, saying so."""
    token = api_token_for(request.user, pk)
    notice = _("API token “%(name)s” was revoked already.") % {"name": token.name}
    if token.revoked_at is None:
        if not confirmed(request):
            question = Question(
                title=_("Revoke “%(name)s”?") % {"name": token.name},
                message=_(
                    "Anything using %(prefix)s… gets 401 from the API from now on. "
                    "This cannot be undone."
                )
                % {"prefix": token.prefix},
                submit_label=_("Revoke token"),
                cancel_url=reverse("tokens:list"),
            )
            return confirm_page(request, question)
        with suppress(InvalidTransition):  # a second submission that raced the first
            api_token_revoke(actor=request.user, token=token)
            notice = _("API token “%(name)s” was revoked; it no longer works on the API.") % {
                "name": token.name
            }
    if request.htmx:
        return render(request, f"{TEMPLATE}#tokens-table", _context(request, notice=notice))
    messages.success(request, notice)
    return redirect("tokens:list")
