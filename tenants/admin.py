from django.contrib import admin
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext as _

from portal.core.admin import PortalLink, ReadOnlyAdmin, ReadOnlyInline
from tenants.models import Membership, Tenant


class MembershipInline(ReadOnlyInline):
    model = Membership


@admin.register(Tenant)
class TenantAdmin(ReadOnlyAdmin):
    """Read-only: tenant_update, tenant state changes, quota_set and membership_set audit each
    change and queue the provisioning run that applies it to the clusters."""

    list_display = ("slug", "name", "cost_centre", "state")
    list_filter = ("state",)
    search_fields = ("slug", "name", "cost_centre")
    inlines = [MembershipInline]

    def portal_link(self, obj: models.Model | None) -> PortalLink:
        if not isinstance(obj, Tenant):
            return PortalLink(_("Tenants"), reverse("tenants:manage"))
        return PortalLink(
            _("the page of %(tenant)s (state, settings, quotas and members)") % {"tenant": obj},
            reverse("tenants:detail", args=[obj.slug]),
        )
