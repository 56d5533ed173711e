"""Registering and changing clusters, and asking for a reconcile or capacity read now."""

from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from portal.accounts.models import User
from portal.cluster.models import Cluster
from portal.cluster.services.runs import provisioning_run_queue
from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.errors import Conflict, ValidationFailed
from portal.core.services import instance_update
from portal.core.validators import model_problems
from tenants.models import Tenant, TenantState

CLUSTER_FIELDS = (
    "mode",
    "connection",
    "kubeconfig_path",
    "kubeconfig_context",
    "namespace_prefix",
    "ingress_namespace_labels",
    "monitoring_namespace_labels",
    "identity_prefix",
    "pods_per_namespace",
    "volumes_per_namespace",
    "notebook_host_pattern",
    "notebook_ingress_class",
    "notebook_url_scheme",
    "prometheus_url",
    "metrics_interval_seconds",
    "enabled",
)


# Both are set by the portal's own tasks, never by a person.
_CLEAN = {"exclude": ["capacity_collected_at", "reconciled_at"]}


def _cluster_check(cluster: Cluster) -> None:
    if cluster.connection == "kubeconfig" and not cluster.kubeconfig_path:
        raise ValidationFailed.on(
            "kubeconfig_path", _("Give the path of the kubeconfig file mounted from a secret.")
        )


def _cluster_clean(cluster: Cluster) -> None:
    problems = model_problems(cluster, **_CLEAN)
    if problems:
        raise ValidationFailed.of("cluster", problems)
    _cluster_check(cluster)


def _provision_every_tenant(cluster: Cluster, *, reason: str, actor: User | None) -> None:
    if cluster.enabled:
        for tenant in Tenant.objects.exclude(state=TenantState.ARCHIVED):
            provisioning_run_queue(cluster=cluster, tenant=tenant, reason=reason, actor=actor)


@transaction.atomic
def cluster_create(*, actor: User | None, name: str, **fields: Any) -> Cluster:
    """Register a cluster; every active tenant is then provisioned in it.

    Raises ValidationFailed naming each bad field, Conflict if the name is taken.
    """
    unknown = set(fields) - set(CLUSTER_FIELDS)
    if unknown:
        raise ValidationFailed(
            _("Unknown fields: %(fields)s.") % {"fields": ", ".join(sorted(unknown))}
        )
    cluster = Cluster(name=name, **fields)
    if Cluster.objects.filter(name=name).exists():
        raise Conflict(
            _("A cluster %(name)r exists already.") % {"name": name}, fields={"name": [_("Taken.")]}
        )
    _cluster_clean(cluster)
    cluster.save()
    audit_record(
        actor=actor,
        action="cluster.create",
        target=cluster,
        changes=changes_between({}, snapshot(cluster, ("name", *CLUSTER_FIELDS))),
    )
    _provision_every_tenant(cluster, reason=gettext_noop("cluster added"), actor=actor)
    return cluster


@transaction.atomic
def cluster_update(*, actor: User, cluster: Cluster, **fields: Any) -> Cluster:
    """Change how a cluster is reached or what its bundles hold; tenants are re-provisioned."""
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    if "namespace_prefix" in fields and fields["namespace_prefix"] != cluster.namespace_prefix:
        # The namespaces already made would be left behind, quotas and bindings intact.
        raise ValidationFailed.on(
            "namespace_prefix",
            _("Cannot change once namespaces exist; register a new cluster instead."),
        )
    changes = instance_update(
        actor=actor,
        instance=cluster,
        changes=fields,
        allowed=CLUSTER_FIELDS,
        action="cluster.update",
        full_clean=_CLEAN,
        check=_cluster_check,
    )
    if changes:
        _provision_every_tenant(cluster, reason=gettext_noop("cluster changed"), actor=actor)
    return cluster


@transaction.atomic
def cluster_refresh_request(*, actor: User, cluster: Cluster, what: str) -> None:
    """Queue a reconcile (`what="reconcile"`) or a capacity read (`"capacity"`) of `cluster`
    now rather than at the next period."""
    from portal.cluster.tasks import collect_cluster_capacity, reconcile_cluster  # noqa: PLC0415

    tasks = {"reconcile": reconcile_cluster, "capacity": collect_cluster_capacity}
    if what not in tasks:
        raise ValidationFailed.on("action", _("Unknown action %(what)r.") % {"what": what})
    audit_record(actor=actor, action=f"cluster.{what}_requested", target=cluster)
    tasks[what].delay(cluster.pk)
