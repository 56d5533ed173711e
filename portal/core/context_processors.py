from typing import Any

from django.http import HttpRequest

from portal.core.navigation import navigation_for, persona_of


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"navigation": [], "persona": None}
    persona = persona_of(user)
    items = [(entry.label, entry.url_name) for entry in navigation_for(persona)]
    return {"navigation": items, "persona": persona}
