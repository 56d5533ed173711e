import zoneinfo
from functools import cache

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy, pgettext_lazy

from portal.core.loading import LoadedFromRows


@cache
def time_zone_names() -> frozenset[str]:
    """The IANA time zone names this machine knows (the system's tz database or tzdata)."""
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def validate_time_zone(value: str) -> None:
    """An IANA time zone name such as `Asia/Shanghai` or `UTC`."""
    if value not in time_zone_names():
        raise ValidationError(
            gettext_lazy("Unknown time zone %(value)s: give an IANA name such as Asia/Shanghai."),
            code="invalid_time_zone",
            params={"value": value},
        )


class GlobalRole(models.TextChoices):
    """Roles that span every tenant. Tenant roles live on memberships."""

    NONE = "", pgettext_lazy("global role", "none")
    FINANCE = "finance", pgettext_lazy("global role", "finance")
    ADMIN = "admin", pgettext_lazy("global role", "admin")


class MemberRole(models.TextChoices):
    """A user's role in one tenant; held on the tenants app's memberships."""

    DEVELOPER = "developer", pgettext_lazy("tenant role", "developer")
    LEAD = "lead", pgettext_lazy("tenant role", "lead")


class User(LoadedFromRows, AbstractUser):
    global_role = models.CharField(
        max_length=16, choices=GlobalRole.choices, default=GlobalRole.NONE, blank=True
    )
    # Blank: follow the browser's Accept-Language (portal.accounts.middleware).
    language = models.CharField(
        gettext_lazy("language"),
        max_length=16,
        choices=settings.LANGUAGES,
        blank=True,
        default="",
    )
    time_zone = models.CharField(
        gettext_lazy("time zone"),
        max_length=64,
        default="UTC",
        validators=[validate_time_zone],
    )

    class Meta:
        db_table = "accounts_user"

    @property
    def is_portal_admin(self) -> bool:
        return self.global_role == GlobalRole.ADMIN

    @property
    def is_finance(self) -> bool:
        return self.global_role == GlobalRole.FINANCE

    @property
    def sees_all_tenants(self) -> bool:
        """Admins and finance read every tenant; everyone else only their own."""
        return self.global_role in (GlobalRole.ADMIN, GlobalRole.FINANCE)


class SsoProfile(models.Model):
    """What the identity provider said about a user at their last sign-in, for admins to see."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="sso")
    subject = models.CharField(max_length=255, unique=True)
    groups = models.JSONField(default=list, blank=True)
    roles = models.JSONField(default=list, blank=True)
    unmatched_groups = models.JSONField(default=list, blank=True)
    signed_in_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user} ({self.subject})"


class ApiToken(LoadedFromRows, models.Model):
    """A personal API token. Only its SHA-256 digest is kept; the token is shown once."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
