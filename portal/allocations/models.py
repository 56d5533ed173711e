from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.catalog.cache import CatalogPrefetching
from portal.catalog.gpu_eq import gpu_eq_columns, gpu_eq_constraints, gpu_eq_property
from portal.core.choices import ChoiceLabel
from portal.core.loading import LoadedFromRows
from portal.core.visibility import VisibleQuerySet, register_scope
from tenants.access import in_tenants_of_user, own_or_led, sees_everything
from tenants.models import MemberRole


class RequestState(models.TextChoices):
    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    ACTIVE = "active", _("active")
    RELEASED = "released", _("released")
    EXPIRED = "expired", _("expired")
    REVOKED = "revoked", _("revoked")
    REJECTED = "rejected", _("rejected")
    CANCELLED = "cancelled", _("cancelled")


# An approved request is an allocation: it holds quota until it ends.
HOLDING_STATES = (RequestState.APPROVED, RequestState.ACTIVE)
FINAL_STATES = (
    RequestState.RELEASED,
    RequestState.EXPIRED,
    RequestState.REVOKED,
    RequestState.REJECTED,
    RequestState.CANCELLED,
)


class Purpose(models.TextChoices):
    NOTEBOOK = "notebook", _("notebook")
    BATCH = "batch", _("batch")
    RESERVATION = "reservation", _("reservation")


class RequestQuerySet(  # type: ignore[override]  # as_manager's type, from the stubs
    CatalogPrefetching["GpuRequest"], VisibleQuerySet["GpuRequest"]
):
    """Requests' querysets: visibility, and offerings and GPU models prefetched from the
    process's catalog rows (portal.catalog.cache)."""


class ExtensionQuerySet(  # type: ignore[override]  # as_manager's type, from the stubs
    CatalogPrefetching["GpuRequestExtension"], VisibleQuerySet["GpuRequestExtension"]
):
    """Extensions' querysets, as requests'."""


class GpuRequest(LoadedFromRows, models.Model):
    """A request for `count` units of an offering in a tenant; an allocation once approved."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="requests")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="gpu_requests"
    )
    offering = models.ForeignKey("catalog.Offering", on_delete=models.PROTECT, related_name="+")
    # Copied from the offering: quota is per model, and the offering may be edited later.
    gpu_model = models.ForeignKey("catalog.GpuModel", on_delete=models.PROTECT, related_name="+")
    count = models.PositiveIntegerField()
    gpu_eq_num, gpu_eq_den = gpu_eq_columns("gpu_eq")
    gpu_eq = gpu_eq_property("gpu_eq")  # count x the offering's GPU-eq at request time
    state = models.CharField(
        max_length=16, choices=RequestState.choices, default=RequestState.PENDING
    )
    state_label = ChoiceLabel("state")  # get_state_display(), for lists
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.NOTEBOOK)
    justification = models.TextField(blank=True)
    duration_hours = models.PositiveIntegerField(default=8)
    # Set when approved: the allocation holds quota from starts_at until ends_at.
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    expiry_notice_sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RequestQuerySet.as_manager()

    # Not stored: why `gpu_request_submit` refused the request it returns ("quota", or
    # "unserved" when no GPU pool serves the offering), for the API's answer; "" otherwise.
    refused_for: str = ""
    # Not stored: the extension `gpu_request_extend` left waiting for a lead (None when it
    # extended the allocation at once), for the API's 202 and the page's message.
    extension_pending: "GpuRequestExtension | None" = None

    class Meta:
        verbose_name = _("GPU request")
        ordering = ["-created_at", "-id"]
        # The lists' order, alone (everything: admins, finance) and after each branch of the
        # visibility filter (one's own; a led tenant's), so a page is an index range, not a sort.
        indexes = [
            models.Index(fields=["tenant", "gpu_model", "state"]),
            models.Index(fields=["state", "ends_at"]),
            models.Index(fields=["-created_at", "-id"], name="gpurequest_newest"),
            models.Index(fields=["requester", "-created_at", "-id"], name="gpurequest_own_newest"),
            models.Index(fields=["tenant", "-created_at", "-id"], name="gpurequest_tenant_newest"),
            # What allocations hold (the ledger: quota lines of a page of tenants, a decision's
            # sum under its lock): the few approved and active rows among a million, per tenant
            # and model, without reading each tenant's past requests.
            models.Index(
                fields=["tenant", "gpu_model"],
                condition=models.Q(state__in=HOLDING_STATES),
                name="gpurequest_holding",
            ),
        ]
        constraints = gpu_eq_constraints("gpu_eq", model="gpurequest")

    def __str__(self) -> str:
        return f"request {self.pk}"


def _visible_gpu_requests(
    requests: models.QuerySet[GpuRequest], user: User
) -> models.QuerySet[GpuRequest]:
    """Admins and finance: all; leads: their tenants'; everyone: their own."""
    if sees_everything(user):
        return requests
    return own_or_led(requests, user, models.Q(requester=user))


register_scope(GpuRequest, _visible_gpu_requests)


class ExtensionState(models.TextChoices):
    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")
    CANCELLED = "cancelled", _("cancelled")


class GpuRequestExtension(LoadedFromRows, models.Model):
    """A request for more time on an allocation, beyond what the tenant's policy grants at once:
    it waits for a lead of the tenant (not the requester) or an admin. At most one pending per
    allocation; an approval lengthens the allocation by `hours`."""

    request = models.ForeignKey(GpuRequest, on_delete=models.PROTECT, related_name="extensions")
    hours = models.PositiveIntegerField()
    reason = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    state = models.CharField(
        max_length=16, choices=ExtensionState.choices, default=ExtensionState.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ExtensionQuerySet.as_manager()

    class Meta:
        verbose_name = _("extension")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "created_at"])]
        constraints = [
            # Retries and double clicks cannot leave two extensions waiting on one allocation.
            models.UniqueConstraint(
                fields=["request"],
                condition=models.Q(state="pending"),
                name="extension_one_pending_per_request",
            ),
            models.CheckConstraint(condition=models.Q(hours__gte=1), name="extension_hours_min"),
        ]

    def __str__(self) -> str:
        return f"extension {self.pk} of request {self.request_id}"


def _visible_extensions(
    extensions: models.QuerySet[GpuRequestExtension], user: User
) -> models.QuerySet[GpuRequestExtension]:
    """As their requests: admins and finance all; leads their tenants'; everyone their own."""
    if sees_everything(user):
        return extensions
    return extensions.filter(
        models.Q(requested_by=user)
        | models.Q(request__requester=user)
        | in_tenants_of_user(user, [MemberRole.LEAD], path="request__tenant")
    )


register_scope(GpuRequestExtension, _visible_extensions)
