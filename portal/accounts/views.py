"""Signing in and out: through the identity provider when SSO is on, with a password otherwise
(or for the break-glass accounts); and the admins' page of how sign-in maps to the portal."""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from portal.accounts.errors import ProviderUnavailable, SignInRefused
from portal.accounts.filters import UserFilter
from portal.accounts.selectors import (
    sign_in_mapping,
    sign_in_mapping_for,
    users_for_identity,
)
from portal.accounts.sso import sso_logout_url, sso_sign_in_finish, sso_sign_in_start
from portal.core.http import AuthenticatedHttpRequest
from portal.core.navigation import start_url_for
from portal.core.pagination import BoundedPaginator

logger = logging.getLogger(__name__)

_NEXT = "sso_next"
_ID_TOKEN = "sso_id_token"  # noqa: S105  (a session key, not a secret)


def _sign_in_choices() -> dict[str, object]:
    return {
        "sso_enabled": settings.SSO_ENABLED,
        "provider_name": settings.OIDC_PROVIDER_NAME,
        "password_sign_in": not settings.SSO_ENABLED or bool(settings.PORTAL_BREAK_GLASS_USERS),
    }


class LoginView(auth_views.LoginView):
    """The sign-in page: a "Sign in with <provider>" button when SSO is on, the password form
    when it is off or break-glass accounts are configured."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: object) -> dict[str, object]:
        return super().get_context_data(**_sign_in_choices(), **kwargs)


def sign_in_locked_out(
    request: HttpRequest, response: HttpResponse | None, credentials: dict[str, Any] | None
) -> HttpResponse:
    """The answer to a password sign-in that the throttle refused (axes' AXES_LOCKOUT_CALLABLE):
    the sign-in page again, 429, saying why and for how long."""
    minutes = int(settings.PORTAL_SIGN_IN_LOCKOUT.total_seconds() // 60)
    message = ngettext(
        "Too many failed sign-ins for this account or from this address. "
        "Password sign-in is paused for %(minutes)d minute after the last attempt; "
        "try again then, or ask an administrator.",
        "Too many failed sign-ins for this account or from this address. "
        "Password sign-in is paused for %(minutes)d minutes after the last attempt; "
        "try again then, or ask an administrator.",
        minutes,
    ) % {"minutes": minutes}
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        **_sign_in_choices(),
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": _safe_next(request, request.POST.get("next")) or "",
        "locked_out": message,
    }
    return render(request, "registration/login.html", context, status=429)


def _safe_next(request: HttpRequest, target: str | None) -> str | None:
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return None


@require_GET
def oidc_login(request: HttpRequest) -> HttpResponse:
    """Start the authorization code flow at the provider."""
    if not settings.SSO_ENABLED:
        raise Http404
    request.session[_NEXT] = _safe_next(request, request.GET.get("next"))
    try:
        return sso_sign_in_start(
            request, redirect_uri=request.build_absolute_uri(reverse("accounts:oidc-callback"))
        )
    except SignInRefused as error:
        return _sign_in_failed(request, error.reason, status=502)


def _sign_in_failed(request: HttpRequest, reason: str, *, status: int) -> HttpResponse:
    logger.warning("sign-in refused: %s", reason)
    return render(request, "accounts/sign_in_failed.html", {"reason": reason}, status=status)


@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: check it, apply the mapping, open the session."""
    if not settings.SSO_ENABLED:
        raise Http404
    try:
        outcome, id_token = sso_sign_in_finish(request)
    except ProviderUnavailable as error:
        return _sign_in_failed(request, error.reason, status=502)
    except SignInRefused as error:
        return _sign_in_failed(request, error.reason, status=400)
    if not outcome.has_access:
        return render(
            request,
            "accounts/no_access.html",
            {"mapping": outcome.mapping, "rules": sign_in_mapping()},
            status=403,
        )
    next_url = request.session.pop(_NEXT, None)
    login(request, outcome.user, backend="portal.accounts.backends.SsoBackend")
    request.session[_ID_TOKEN] = id_token
    return redirect(next_url or start_url_for(outcome.user))


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """End the portal's session, and the provider's too where it supports RP-initiated logout."""
    id_token = request.session.get(_ID_TOKEN, "")
    logout(request)
    if settings.SSO_ENABLED and id_token:
        url = sso_logout_url(
            id_token=id_token,
            post_logout_redirect_uri=request.build_absolute_uri(reverse("accounts:login")),
        )
        if url:
            return redirect(url)
    return redirect("accounts:login")


@login_required
def identity(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Admins: the sign-in mapping in force, and what it gave each user at their last sign-in."""
    users = UserFilter(request.GET, queryset=users_for_identity(request.user), request=request)
    page = BoundedPaginator(users.qs, 25).get_page(request.GET.get("page"))
    return render(
        request,
        "accounts/identity.html",
        {"rules": sign_in_mapping_for(request.user), "page": page, "filters": users.form},
    )
