from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

# A tenant's namespace is `t-<slug>`, a DNS-1123 label of at most 63 characters.
slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,59}[a-z0-9])?$",
    "Use 1 to 61 lowercase letters, digits and hyphens; start and end with a letter or digit.",
)


class TenantState(models.TextChoices):
    ACTIVE = "active", "active"
    SUSPENDED = "suspended", "suspended"
    ARCHIVED = "archived", "archived"


class Tenant(models.Model):
    """A team or department that shares the GPU pool under its own quota."""

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    cost_centre = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=TenantState.choices, default=TenantState.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class MemberRole(models.TextChoices):
    DEVELOPER = "developer", "developer"
    LEAD = "lead", "lead"


class Membership(models.Model):
    """A user's role in one tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=MemberRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_per_tenant")
        ]
        ordering = ["tenant__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} as {self.role}"
