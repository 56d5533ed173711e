from fractions import Fraction

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

# Re-exported: memberships hold the role, which the accounts app defines with the global ones.
from portal.accounts.models import MemberRole as MemberRole  # noqa: PLC0414
from portal.catalog.cache import CatalogPrefetching
from portal.catalog.gpu_eq import gpu_eq_columns, gpu_eq_constraints, gpu_eq_property
from portal.core.choices import ChoiceLabel
from portal.core.loading import LoadedFromRows
from portal.core.validators import slug_validator
from portal.core.visibility import VisibleQuerySet


class TenantState(models.TextChoices):
    # "active" also names an allocation's state, which reads differently in Chinese.
    ACTIVE = "active", pgettext_lazy("tenant state", "active")
    SUSPENDED = "suspended", _("suspended")
    ARCHIVED = "archived", _("archived")


class Tenant(LoadedFromRows, models.Model):
    """A team or department that shares the GPU pool under its own quota and policy."""

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    cost_centre = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=TenantState.choices, default=TenantState.ACTIVE)
    state_label = ChoiceLabel("state")  # get_state_display(), for lists
    # Approval policy: requests up to both limits are approved at once; above, a lead decides.
    auto_approve_gpu_eq_num, auto_approve_gpu_eq_den = gpu_eq_columns(
        "auto_approve_gpu_eq", default=Fraction(1)
    )
    auto_approve_gpu_eq = gpu_eq_property("auto_approve_gpu_eq")
    auto_approve_hours = models.PositiveIntegerField(default=8)
    default_duration_hours = models.PositiveIntegerField(default=8)
    max_duration_hours = models.PositiveIntegerField(default=168)
    # Quotas beyond GPUs, for the namespace's ResourceQuota.
    cpu_cores_quota = models.PositiveIntegerField(default=64)
    memory_gib_quota = models.PositiveIntegerField(default=256)
    storage_gib_quota = models.PositiveIntegerField(default=1024)
    # Notebooks idle this long are stopped (workspace kept); 0 never stops them.
    notebook_idle_minutes = models.PositiveIntegerField(default=60)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        constraints = [
            *gpu_eq_constraints("auto_approve_gpu_eq", model="tenant"),
            models.CheckConstraint(
                condition=models.Q(default_duration_hours__lte=models.F("max_duration_hours")),
                name="tenant_default_duration_within_max",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def namespace(self) -> str:
        return f"t-{self.slug}"


class Membership(LoadedFromRows, models.Model):
    """A user's role in one tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=MemberRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_per_tenant")
        ]
        ordering = ["tenant__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} as {self.role}"


class QuotaQuerySet(  # type: ignore[override]  # as_manager's type, from the stubs
    CatalogPrefetching["Quota"], VisibleQuerySet["Quota"]
):
    """Quotas' querysets: visibility, and GPU models prefetched from the process's catalog
    rows (portal.catalog.cache)."""


class Quota(LoadedFromRows, models.Model):
    """A tenant's GPU quota for one GPU model, in GPU-eq."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    gpu_model = models.ForeignKey("catalog.GpuModel", on_delete=models.PROTECT, related_name="+")
    gpu_eq_num, gpu_eq_den = gpu_eq_columns("gpu_eq")
    gpu_eq = gpu_eq_property("gpu_eq")
    updated_at = models.DateTimeField(auto_now=True)

    objects = QuotaQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug", "gpu_model__name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "gpu_model"], name="quota_unique_per_model"),
            *gpu_eq_constraints("gpu_eq", model="quota"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.gpu_model}: {self.gpu_eq}"


class QuotaRequestState(models.TextChoices):
    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")


class QuotaRequest(models.Model):
    """A lead's request for more quota of one GPU model; an admin decides."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quota_requests")
    gpu_model = models.ForeignKey("catalog.GpuModel", on_delete=models.PROTECT, related_name="+")
    amount_num, amount_den = gpu_eq_columns("amount")
    amount = gpu_eq_property("amount")  # GPU-eq to add to the quota
    reason = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    state = models.CharField(
        max_length=16, choices=QuotaRequestState.choices, default=QuotaRequestState.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decision_comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = gpu_eq_constraints("amount", model="quotarequest")

    def __str__(self) -> str:
        return f"quota request {self.pk}"
