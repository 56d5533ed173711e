"""The profile page (language and time zone) and the header's language switcher."""

from typing import Any, Literal, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from portal.accounts.preferences import is_language, user_preferences_set
from portal.accounts.profile_forms import ProfileForm
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_page


def _same_site() -> Literal["Lax", "Strict", "None"]:
    return cast("Literal['Lax', 'Strict', 'None']", settings.LANGUAGE_COOKIE_SAMESITE)


def _remember_language(response: HttpResponse, language: str) -> HttpResponse:
    """The language cookie LocaleMiddleware reads for people not signed in (after signing out,
    the sign-in page keeps their language); deleted when they follow the browser again."""
    if language:
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME,
            language,
            max_age=settings.LANGUAGE_COOKIE_AGE,
            path=settings.LANGUAGE_COOKIE_PATH,
            domain=settings.LANGUAGE_COOKIE_DOMAIN,
            secure=settings.LANGUAGE_COOKIE_SECURE,
            httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
            samesite=_same_site(),
        )
    else:
        response.delete_cookie(
            settings.LANGUAGE_COOKIE_NAME,
            path=settings.LANGUAGE_COOKIE_PATH,
            domain=settings.LANGUAGE_COOKIE_DOMAIN,
            samesite=_same_site(),
        )
    return response


@login_required
def profile(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The signed-in person's language and time zone."""
    user = request.user
    initial = {"language": user.language, "time_zone": user.time_zone}

    def saved(_user: Any) -> HttpResponse:
        # Confirm in the language just chosen.
        with translation.override(user.language or translation.get_language()):
            messages.success(request, _("Your language and time zone are saved."))
        return _remember_language(redirect("accounts:profile"), user.language)

    return form_page(
        request,
        form=ProfileForm(request.POST if request.method == "POST" else None, initial=initial),
        template="accounts/profile.html",
        context={},
        save=lambda data: user_preferences_set(
            actor=user, user=user, language=data["language"], time_zone=data["time_zone"]
        ),
        success=saved,
    )


@require_POST
def language_switch(request: HttpRequest) -> HttpResponse:
    """The header's language switcher: Django's `set_language` (the cookie, then back to
    `next`), and for a signed-in person the choice saved on their profile too."""
    response = set_language(request)
    language = request.POST.get("language", "")
    if request.user.is_authenticated and is_language(language):
        user_preferences_set(actor=request.user, user=request.user, language=language)
    return response
