from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.core.admin import PortalLink, ReadOnlyAdmin

# The portal's permissions come from global roles and tenant memberships, never from Django's
# groups or permissions: a group made here would grant nothing the portal checks, and
# user_permissions or is_superuser set by hand would grant the whole Django admin unaudited.
admin.site.unregister(Group)


@admin.register(User)
class PortalUserAdmin(ReadOnlyAdmin, UserAdmin):  # type: ignore[type-arg]
    """Read-only. Global roles (and with them is_staff and is_superuser) come from the identity
    provider at each sign-in, or from `manage.py create_user --role` for local accounts; tenant
    roles are memberships, changed on each tenant's page."""

    list_display = ("username", "email", "first_name", "last_name", "global_role", "is_active")
    list_filter = ("global_role", "is_active")
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Portal", {"fields": ("global_role",)}))

    def portal_link(self, obj: models.Model | None) -> PortalLink:
        return PortalLink(
            _("Identity"),
            reverse("accounts:identity"),
            detail=_(
                "Global roles come from the identity provider at each sign-in (local accounts: "
                "manage.py create_user --role); tenant roles are memberships, changed on each "
                "tenant's page."
            ),
        )


@admin.register(AccessAttempt)
class SignInAttemptAdmin(ReadOnlyAdmin, AccessAttemptAdmin):  # type: ignore[misc]
    """The sign-in throttle's counts (django-axes), to see who is locked out."""

    actions = None

    def portal_link(self, obj: models.Model | None) -> PortalLink:
        return PortalLink(
            _(
                "Kept by the sign-in throttle. A lockout ends by itself once the lockout time "
                "has passed since the last attempt; to end it sooner, run "
                "manage.py axes_reset_username <username> or axes_reset_ip <address>."
            )
        )
