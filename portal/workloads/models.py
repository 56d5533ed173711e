from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy, pgettext_lazy

from portal.accounts.models import User
from portal.catalog.cache import CatalogPrefetching
from portal.core.choices import ChoiceLabel
from portal.core.loading import LoadedFromRows
from portal.core.validators import slug_validator
from portal.core.visibility import VisibleQuerySet, register_scope
from tenants.access import in_tenants_of_user, own_or_led


class NotebookQuerySet(  # type: ignore[override]  # as_manager's type, from the stubs
    CatalogPrefetching["Notebook"], VisibleQuerySet["Notebook"]
):
    """Notebooks' querysets: visibility, and their allocations' offerings and GPU models
    prefetched from the process's catalog rows (portal.catalog.cache)."""


class Desired(models.TextChoices):
    """What the owner asked for; the state says how far the cluster has got."""

    RUNNING = "running", gettext_lazy("running")
    STOPPED = "stopped", gettext_lazy("stopped")
    DELETED = "deleted", gettext_lazy("deleted")


class NotebookState(models.TextChoices):
    WAITING = "waiting", gettext_lazy("waiting for approval")
    PENDING = "pending", pgettext_lazy("notebook state", "pending")
    RUNNING = "running", gettext_lazy("running")
    STOPPING = "stopping", gettext_lazy("stopping")
    STOPPED = "stopped", gettext_lazy("stopped")
    FAILED = "failed", gettext_lazy("failed")
    DELETING = "deleting", gettext_lazy("deleting")
    DELETED = "deleted", gettext_lazy("deleted")


# States that change without anyone acting: pages poll while a notebook is in one of them.
MOVING_STATES = (
    NotebookState.WAITING,
    NotebookState.PENDING,
    NotebookState.STOPPING,
    NotebookState.DELETING,
)


class Notebook(LoadedFromRows, models.Model):
    """A Jupyter notebook on one allocation: a StatefulSet, a Service, a workspace volume and,
    where the cluster publishes notebooks on a host, an Ingress, in the tenant's namespace."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="notebooks")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="notebooks"
    )
    allocation = models.ForeignKey(
        "allocations.GpuRequest", on_delete=models.PROTECT, related_name="notebooks"
    )
    cluster = models.ForeignKey("cluster.Cluster", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=40, validators=[slug_validator])
    image = models.ForeignKey("catalog.NotebookImage", on_delete=models.PROTECT, related_name="+")
    # Copied at launch: the list entry may point at a newer tag later.
    image_reference = models.CharField(max_length=300)
    cpu_cores = models.DecimalField(
        max_digits=6, decimal_places=3, validators=[MinValueValidator(0)]
    )
    memory_gib = models.PositiveIntegerField()
    workspace_gib = models.PositiveIntegerField()
    desired = models.CharField(max_length=16, choices=Desired.choices, default=Desired.RUNNING)
    state = models.CharField(
        max_length=16, choices=NotebookState.choices, default=NotebookState.PENDING
    )
    state_label = ChoiceLabel("state")  # get_state_display(), for lists
    reason = models.TextField(blank=True, help_text=gettext_lazy("Why it waits, or why it failed"))
    keep_workspace = models.BooleanField(
        default=True, help_text=gettext_lazy("Kept when the notebook is deleted")
    )
    # Jupyter's token, handed to the server through a Secret and shown only to the owner.
    token = models.CharField(max_length=64)
    url = models.CharField(max_length=500, blank=True)
    events = models.JSONField(
        default=list, blank=True, help_text=gettext_lazy("Warnings last seen")
    )
    observed_at = models.DateTimeField(null=True, blank=True)
    observe_requested_at = models.DateTimeField(null=True, blank=True)
    running_since = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # Culling: idle since (as last measured), when the owner was told, when it will stop.
    idle_since = models.DateTimeField(null=True, blank=True)
    cull_notice_at = models.DateTimeField(null=True, blank=True)
    cull_at = models.DateTimeField(null=True, blank=True)
    snoozed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = NotebookQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "state"]),
            models.Index(fields=["owner", "state"]),
            models.Index(fields=["cluster", "state"]),
            models.Index(fields=["-created_at", "-id"], name="notebook_newest"),
            models.Index(fields=["owner", "-created_at", "-id"], name="notebook_own_newest"),
            models.Index(fields=["tenant", "-created_at", "-id"], name="notebook_tenant_newest"),
        ]
        constraints = [
            # One notebook per allocation: a retried launch cannot hold the GPU twice.
            models.UniqueConstraint(
                fields=["allocation"],
                condition=~models.Q(state="deleted"),
                name="notebook_one_per_allocation",
            )
        ]

    def __str__(self) -> str:
        return f"notebook {self.name} ({self.kubernetes_name})"

    @property
    def kubernetes_name(self) -> str:
        return f"nb-{self.pk}"

    @property
    def moving(self) -> bool:
        return self.state in MOVING_STATES


def _visible_notebooks(
    notebooks: models.QuerySet[Notebook], user: User
) -> models.QuerySet[Notebook]:
    """Admins: every notebook. Others: their own in tenants they are still members of, and
    their led tenants' notebooks. Whoever sees a notebook may stop, start and delete it."""
    if user.is_portal_admin:
        return notebooks
    return own_or_led(notebooks, user, models.Q(owner=user) & in_tenants_of_user(user))


register_scope(Notebook, _visible_notebooks)
