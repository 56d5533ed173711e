from typing import Any

from django.http import HttpRequest

from portal.core.navigation import Navigation


def navigation(request: HttpRequest) -> dict[str, Any]:
    """The header's navigation; lazy, so fragments that do not show it run no query for it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav": None}
    return {"nav": Navigation(user, request.path)}
