"""The Django admin shows; the portal changes.

Every model here is owned by services that audit each change and queue the provisioning it
needs; a save in the admin would do neither. So every admin page is read-only (no add, change
or delete, and no bulk actions), and each change form says where in the portal the change is
made instead.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from portal.core.models import WorkerHeartbeat


@dataclass(frozen=True)
class PortalLink:
    """Where in the portal a model's changes are made (`url`, named by `text`, explained by
    `detail`), or, without a url, a sentence saying who makes them."""

    text: str
    url: str = ""
    detail: str = ""


class NoWrites:
    """No add, change or delete, whoever asks (superusers included)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(NoWrites, admin.ModelAdmin):  # type: ignore[type-arg]
    """Shows a model's rows and change forms, and refuses every write (a POST is 403)."""

    change_form_template = "admin/read_only_change_form.html"
    actions = None

    def portal_link(self, obj: models.Model | None) -> PortalLink | None:
        """Where the change is made; None when the portal has no page for it."""
        return None

    def render_change_form(  # noqa: PLR0917  (Django's signature)
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: models.Model | None = None,
    ) -> HttpResponse:
        context["portal_link"] = self.portal_link(obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


class ReadOnlyInline(NoWrites, admin.TabularInline):  # type: ignore[type-arg]
    extra = 0
    can_delete = False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = ("worker", "beat_at")

    def portal_link(self, obj: models.Model | None) -> PortalLink:
        return PortalLink(_("Written by the workers' heartbeat task every minute."))
