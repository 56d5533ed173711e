"""Applies the signed-in person's saved language and time zone to the pages they open."""

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

from portal.accounts.models import time_zone_names

# The API follows the caller's Accept-Language only and answers times in UTC (API.md).
API_PREFIX = "/api/"


class UserPreferencesMiddleware:
    """After AuthenticationMiddleware (and LocaleMiddleware, which has chosen the language from
    the language cookie or Accept-Language): a signed-in person's saved language overrides that
    choice, and their time zone becomes the current one, so `|date` and `{% now %}` show their
    local time. People not signed in, and every API call, get the browser's language and UTC."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        timezone.deactivate()
        if (
            user is not None
            and user.is_authenticated
            and not request.path_info.startswith(API_PREFIX)
        ):
            if user.language:
                translation.activate(user.language)
                request.LANGUAGE_CODE = translation.get_language()
            if user.time_zone in time_zone_names():
                timezone.activate(zoneinfo.ZoneInfo(user.time_zone))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
