import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
    URLValidator,
)
from django.db import models
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from portal.accounts.models import User
from portal.catalog.validators import validate_label_key, validate_label_value
from portal.core.validators import slug_validator
from portal.core.visibility import VisibleQuerySet, register_scope
from tenants.access import in_tenants_where

MANAGED_BY = "gpu-portal"


def validate_labels(value: object) -> None:
    """A namespace selector written as labels: {key: value}, each valid in Kubernetes."""
    if not isinstance(value, dict):
        raise ValidationError(_("Write the labels as an object of key: value."))
    for key, label in value.items():
        validate_label_key(str(key))
        if not isinstance(label, str):
            raise ValidationError(_("The value of %(key)s must be text.") % {"key": key})
        validate_label_value(label)


def validate_host_pattern(value: str) -> None:
    """A DNS name with `{name}` (the notebook's Kubernetes name) and optionally `{tenant}`."""
    if "{name}" not in value:
        raise ValidationError(
            _("The pattern must contain {name}, e.g. {name}.{tenant}.example.org.")
        )
    try:
        host = value.format(name="nb-1", tenant="t")
    except (KeyError, IndexError, ValueError):
        raise ValidationError(_("Only {name} and {tenant} may appear in braces.")) from None
    labels = host.split(".")
    label = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    if len(host) > 253 or len(labels) < 2 or not all(label.match(part) for part in labels):
        raise ValidationError(_("The pattern must make a lowercase DNS name, e.g. {name}.gpu.org."))


def default_ingress_labels() -> dict[str, str]:
    return {"kubernetes.io/metadata.name": "ingress-nginx"}


def default_monitoring_labels() -> dict[str, str]:
    return {"kubernetes.io/metadata.name": "monitoring"}


namespace_prefix_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,8})?$",
    gettext_lazy(
        "Up to 10 lowercase letters, digits and hyphens, starting with a letter or digit."
    ),
)


class ClusterMode(models.TextChoices):
    KUBERNETES = "kubernetes", gettext_lazy("kubernetes (apply)")
    DRY_RUN = "dry-run", gettext_lazy("dry-run (render and record only)")


class Connection(models.TextChoices):
    IN_CLUSTER = "in-cluster", gettext_lazy("in-cluster service account")
    KUBECONFIG = "kubeconfig", gettext_lazy("kubeconfig file (mounted from a secret)")


class Cluster(models.Model):
    """A Kubernetes cluster the portal provisions tenant namespaces in.

    Credentials are never stored in the database: a cluster connects with the portal's own
    service account (in-cluster) or with a kubeconfig file mounted from a secret.
    """

    name = models.CharField(
        max_length=63,
        unique=True,
        validators=[slug_validator],
        help_text=gettext_lazy("Matches the cluster name of its GPU pools."),
    )
    mode = models.CharField(max_length=16, choices=ClusterMode.choices, default=ClusterMode.DRY_RUN)
    connection = models.CharField(
        max_length=16, choices=Connection.choices, default=Connection.IN_CLUSTER
    )
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    kubeconfig_context = models.CharField(max_length=253, blank=True)
    namespace_prefix = models.CharField(
        max_length=10, default="t-", blank=True, validators=[namespace_prefix_validator]
    )
    # Selectors of the namespaces notebooks accept traffic from; empty renders no allowance.
    ingress_namespace_labels = models.JSONField(
        default=default_ingress_labels, blank=True, validators=[validate_labels]
    )
    monitoring_namespace_labels = models.JSONField(
        default=default_monitoring_labels, blank=True, validators=[validate_labels]
    )
    # How the cluster's OIDC authenticator prefixes usernames and groups (--oidc-*-prefix).
    identity_prefix = models.CharField(max_length=32, default="oidc:", blank=True)
    # Where notebooks are published: an Ingress per notebook on this host pattern, e.g.
    # `{name}.{tenant}.notebooks.example.org`; empty publishes none (port-forward to reach them).
    notebook_host_pattern = models.CharField(
        max_length=200, blank=True, validators=[validate_host_pattern]
    )
    notebook_ingress_class = models.CharField(max_length=63, blank=True)
    notebook_url_scheme = models.CharField(
        max_length=5, default="https", choices=[("https", "https"), ("http", "http")]
    )
    pods_per_namespace = models.PositiveIntegerField(default=50)
    volumes_per_namespace = models.PositiveIntegerField(default=20)
    # Metering reads the cluster's own Prometheus (kube-state-metrics and the DCGM exporter).
    prometheus_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text=gettext_lazy("Empty: PROMETHEUS_URL"),
    )
    metrics_interval_seconds = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text=gettext_lazy("The scrape interval of kube-state-metrics and the DCGM exporter"),
    )
    enabled = models.BooleanField(default=True)
    capacity_collected_at = models.DateTimeField(null=True, blank=True)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def namespace_for(self, tenant_slug: str) -> str:
        return f"{self.namespace_prefix}{tenant_slug}"

    @property
    def metrics_url(self) -> str:
        """This cluster's Prometheus: its own URL, else PROMETHEUS_URL (empty: none)."""
        return self.prometheus_url or settings.PROMETHEUS_URL or ""

    @property
    def applies(self) -> bool:
        """Whether runs talk to the cluster; PORTAL_CLUSTER_MODE=dry-run keeps every cluster dry."""
        return self.mode == ClusterMode.KUBERNETES and settings.PORTAL_CLUSTER_MODE == "kubernetes"


class RunKind(models.TextChoices):
    BUNDLE = "bundle", gettext_lazy("apply the tenant bundle")
    REPAIR = "repair", gettext_lazy("repair drift")
    DELETE = "delete", gettext_lazy("delete the namespace")
    NOTEBOOK = "notebook", gettext_lazy("apply a notebook's objects")


class RunState(models.TextChoices):
    QUEUED = "queued", gettext_lazy("queued")
    RUNNING = "running", gettext_lazy("running")
    SUCCEEDED = "succeeded", gettext_lazy("succeeded")
    FAILED = "failed", gettext_lazy("failed")


UNFINISHED_RUN_STATES = (RunState.QUEUED, RunState.RUNNING)


class ProvisioningRun(models.Model):
    """One attempt to make a tenant's namespace in one cluster match the portal.

    Results are written together with the final state, so a run is never half-reported.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="runs")
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.PROTECT, related_name="provisioning_runs"
    )
    kind = models.CharField(max_length=16, choices=RunKind.choices, default=RunKind.BUNDLE)
    reason = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    dry_run = models.BooleanField(default=False)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    notebook = models.ForeignKey(
        "workloads.Notebook",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="provisioning_runs",
    )
    gpu_requests = models.ManyToManyField(
        "allocations.GpuRequest", blank=True, related_name="provisioning_runs"
    )
    attempts = models.PositiveIntegerField(default=0)
    claimed_by = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    manifests = models.TextField(blank=True, help_text=gettext_lazy("The rendered bundle, as YAML"))
    api_requests = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "cluster", "state"]),
            models.Index(fields=["state", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.kind}, {self.state})"

    @property
    def finished(self) -> bool:
        return self.state not in UNFINISHED_RUN_STATES


class Outcome(models.TextChoices):
    CREATED = "created", gettext_lazy("created")
    CONFIGURED = "configured", gettext_lazy("configured")
    UNCHANGED = "unchanged", gettext_lazy("unchanged")
    DELETED = "deleted", gettext_lazy("deleted")
    SCALED_DOWN = "scaled-down", gettext_lazy("scaled to zero")
    RENDERED = "rendered", gettext_lazy("rendered (dry-run)")
    FAILED = "failed", gettext_lazy("failed")
    SKIPPED = "skipped", gettext_lazy("skipped")


class ProvisioningResult(models.Model):
    """What happened to one object in one run; drift lists the fields that differed."""

    run = models.ForeignKey(ProvisioningRun, on_delete=models.CASCADE, related_name="results")
    position = models.PositiveIntegerField()
    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=100)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    message = models.TextField(blank=True)
    drift = models.JSONField(default=list, blank=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="result_unique_position")
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.outcome}"


class NodeCapacity(models.Model):
    """One node as the last capacity read saw it: labels, allocatable and requested resources.

    Quantities are kept as Kubernetes quantity strings; rows are replaced on every read.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    labels = models.JSONField(default=dict)
    allocatable = models.JSONField(default=dict)
    requested = models.JSONField(default=dict)
    schedulable = models.BooleanField(default=True)
    collected_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class OfferingCapacity(models.Model):
    """What one offering can still get in one pool: a rollup written at each capacity read, so
    pages and the request preview never add up nodes themselves."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    pool = models.CharField(max_length=63)
    gpu_model = models.CharField(max_length=100)
    offering = models.ForeignKey("catalog.Offering", on_delete=models.CASCADE, related_name="+")
    nodes = models.PositiveIntegerField()
    total = models.PositiveIntegerField(
        help_text=gettext_lazy("Units of the offering the pool's nodes offer")
    )
    free = models.PositiveIntegerField(
        help_text=gettext_lazy("Units not requested by running pods")
    )
    collected_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "pool", "offering__slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "pool", "offering"], name="capacity_unique_per_pool_offering"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.pool} {self.offering}: {self.free}/{self.total}"


def _visible_runs(
    runs: models.QuerySet[ProvisioningRun], user: User
) -> models.QuerySet[ProvisioningRun]:
    """Runs of the tenants the user sees."""
    return in_tenants_where(runs, user)


def _visible_results(
    results: models.QuerySet[ProvisioningResult], user: User
) -> models.QuerySet[ProvisioningResult]:
    """Results of the runs the user sees."""
    return in_tenants_where(results, user, path="run__tenant")


register_scope(ProvisioningRun, _visible_runs)
register_scope(ProvisioningResult, _visible_results)
