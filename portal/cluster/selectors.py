"""Reads for provisioning and capacity, narrowed to what a user may see."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import (
    IntegerField,
    Prefetch,
    Q,
    QuerySet,
    Value,
)
from django.urls import reverse
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.allocations.selectors import WaitingReason
from portal.catalog.cache import catalog_kept
from portal.catalog.models import GpuPool, Offering
from portal.cluster.filters import CapacityFilter
from portal.cluster.manifests import BundleSpec, gpu_resource_totals
from portal.cluster.models import (
    Cluster,
    NodeCapacity,
    OfferingCapacity,
    ProvisioningResult,
    ProvisioningRun,
    RunKind,
    RunState,
)
from portal.core.errors import NotFound
from portal.core.filters import filter_or_raise
from portal.core.visibility import VisibleQuerySet, get_visible_or_404
from tenants.access import Access, tenant_for, tenants_of
from tenants.models import MemberRole, Membership, Tenant, TenantState


@dataclass(frozen=True)
class BundleInput:
    """A tenant's bundle spec, and the approved allocations a successful run makes active."""

    spec: BundleSpec
    approved_request_ids: tuple[int, ...]


def known_gpu_resources() -> frozenset[str]:
    """Every extended resource name the catalog's offerings ask for."""
    names: set[str] = set()
    for resources in Offering.objects.values_list("resources", flat=True):
        names.update(resources)
    return frozenset(names)


def bundle_inputs(*, cluster: Cluster, tenants: Iterable[Tenant]) -> dict[int, BundleInput]:
    """The bundle spec of each tenant in `cluster`, in four queries whatever their number."""
    tenants = list(tenants)
    ids = [tenant.pk for tenant in tenants]
    known = known_gpu_resources()
    holdings: dict[int, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    approved: dict[int, list[int]] = defaultdict(list)
    # Quota goes only where the offering runs: to clusters with a pool of its model and
    # backend. A cluster without pool records hosts every offering (pools not described).
    pools = set(GpuPool.objects.filter(cluster=cluster.name).values_list("gpu_model", "backend"))
    held = GpuRequest.objects.filter(tenant_id__in=ids, state__in=HOLDING_STATES).values_list(
        "pk", "tenant_id", "state", "count", "offering__resources", "offering__gpu_model",
        "offering__backend",
    )  # fmt: skip
    for pk, tenant_id, state, count, resources, model, backend in held.order_by("pk"):
        if pools and (model, backend) not in pools:
            continue
        holdings[tenant_id].append((resources, count))
        if state == RequestState.APPROVED:
            approved[tenant_id].append(pk)
    members: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for tenant_id, role, username in Membership.objects.filter(tenant_id__in=ids).values_list(
        "tenant_id", "role", "user__username"
    ):
        members[tenant_id][role].append(username)
    inputs = {}
    for tenant in tenants:
        spec = BundleSpec(
            tenant_slug=tenant.slug,
            namespace=cluster.namespace_for(tenant.slug),
            suspended=tenant.state != TenantState.ACTIVE,
            cpu_cores=tenant.cpu_cores_quota,
            memory_gib=tenant.memory_gib_quota,
            storage_gib=tenant.storage_gib_quota,
            pods=cluster.pods_per_namespace,
            volumes=cluster.volumes_per_namespace,
            gpu_resources=gpu_resource_totals(holdings[tenant.pk]),
            known_gpu_resources=known,
            leads=tuple(members[tenant.pk][MemberRole.LEAD]),
            developers=tuple(members[tenant.pk][MemberRole.DEVELOPER]),
            identity_prefix=cluster.identity_prefix,
            group_template=settings.PORTAL_TENANT_GROUP,
            ingress_namespace_labels=dict(cluster.ingress_namespace_labels),
            monitoring_namespace_labels=dict(cluster.monitoring_namespace_labels),
        )
        inputs[tenant.pk] = BundleInput(spec=spec, approved_request_ids=tuple(approved[tenant.pk]))
    return inputs


def bundle_input(*, cluster: Cluster, tenant: Tenant) -> BundleInput:
    return bundle_inputs(cluster=cluster, tenants=[tenant])[tenant.pk]


def _runs() -> VisibleQuerySet[ProvisioningRun]:
    return ProvisioningRun.objects.select_related("cluster", "tenant", "requested_by")


def provisioning_runs_for(user: User) -> QuerySet[ProvisioningRun]:
    """Runs of the tenants the user sees (`ProvisioningRun.objects.visible_to`)."""
    return _runs().visible_to(user)


def provisioning_run_for(user: User, pk: int) -> ProvisioningRun:
    """One run with its results, if the user sees its tenant; otherwise NotFound."""
    runs = _runs().prefetch_related(Prefetch("results", queryset=ProvisioningResult.objects.all()))
    return get_visible_or_404(runs, user, pk=pk)


def recent_runs(tenant: Tenant, *, limit: int = 5) -> list[ProvisioningRun]:
    """A tenant's latest runs with their results, in two queries."""
    return list(
        _runs()
        .filter(tenant=tenant)
        .prefetch_related("results")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class ProvisioningOverview:
    """A tenant page's provisioning section: the latest runs, whether one is in progress, and
    the namespace objects as the latest finished run left them."""

    runs: list[ProvisioningRun]
    objects: list[ProvisioningResult]
    in_progress: bool
    unserved: list[GpuRequest]


def allocations_unserved(tenant: Tenant) -> list[GpuRequest]:
    """The tenant's approved allocations of offerings that no GPU pool serves (`offering_served`):
    approved before such requests were refused, they hold quota and no run can make them active.
    An admin revokes them or adds the pool they need."""
    approved = GpuRequest.objects.filter(tenant=tenant, state=RequestState.APPROVED)
    served: dict[int, bool] = {}
    unserved = []
    for gpu_request in approved.select_related("offering").order_by("pk"):
        if gpu_request.offering_id not in served:
            served[gpu_request.offering_id] = offering_served(gpu_request.offering)
        if not served[gpu_request.offering_id]:
            unserved.append(gpu_request)
    return unserved


def provisioning_overview(tenant: Tenant) -> ProvisioningOverview:
    runs = recent_runs(tenant)
    finished = next((run for run in runs if run.finished), None)
    return ProvisioningOverview(
        runs=runs,
        objects=list(finished.results.all()) if finished else [],
        in_progress=any(not run.finished for run in runs),
        unserved=allocations_unserved(tenant),
    )


def tenant_provisioning_for(user: User, slug: str) -> tuple[Tenant, ProvisioningOverview]:
    tenant = tenant_for(user, slug, Access.VIEW)
    return tenant, provisioning_overview(tenant)


def failed_runs(cluster: Cluster, *, limit: int = 20) -> list[ProvisioningRun]:
    return list(_runs().filter(cluster=cluster, state="failed").order_by("-created_at")[:limit])


def drift_runs(cluster: Cluster, *, limit: int = 20) -> list[ProvisioningRun]:
    return list(
        _runs()
        .filter(cluster=cluster, kind="repair")
        .prefetch_related("results")
        .order_by("-created_at")[:limit]
    )


@dataclass(frozen=True)
class CapacityRow:
    """What one offering can still get in one pool: in its own units and in GPU-eq."""

    cluster: str
    pool: str
    gpu_model: str
    offering: Offering
    total: int
    free: int
    nodes: int

    @property
    def allocated(self) -> int:
        return self.total - self.free

    @property
    def total_gpu_eq(self) -> Fraction:
        return Fraction(self.offering.gpu_eq) * self.total

    @property
    def allocated_gpu_eq(self) -> Fraction:
        return Fraction(self.offering.gpu_eq) * self.allocated

    @property
    def free_gpu_eq(self) -> Fraction:
        return Fraction(self.offering.gpu_eq) * self.free


def offering_capacities() -> QuerySet[OfferingCapacity]:
    """The capacity rollups of enabled clusters and offerings."""
    return OfferingCapacity.objects.filter(cluster__enabled=True, offering__enabled=True)


def capacity_rows_of(rows: QuerySet[OfferingCapacity]) -> list[CapacityRow]:
    """Total, allocated and free units per cluster, pool and offering, as the last capacity
    read rolled them up. One query whatever the number of nodes, pools or offerings."""
    return [
        CapacityRow(
            cluster=row.cluster.name,
            pool=row.pool,
            gpu_model=row.gpu_model,
            offering=row.offering,
            total=row.total,
            free=row.free,
            nodes=row.nodes,
        )
        for row in rows.select_related("cluster", "offering").order_by(
            "cluster__name", "pool", "offering__slug"
        )
    ]


def capacity_rows(
    *, cluster: str | None = None, gpu_model: str | None = None, offering: str | None = None
) -> list[CapacityRow]:
    """Capacity rows, narrowed by the capacity list's own filters."""
    wanted = {"cluster": cluster, "gpu_model": gpu_model, "offering": offering}
    filters = CapacityFilter(
        {name: value for name, value in wanted.items() if value}, queryset=offering_capacities()
    )
    return capacity_rows_of(filter_or_raise(filters))


def capacity_free_units(offering: Offering) -> int | None:
    """Free units of `offering` over every cluster, or None when no cluster has been read."""
    rows = capacity_rows(offering=offering.slug)
    return sum(row.free for row in rows) if rows else None


def _served_pools() -> dict[str, set[tuple[int, int]]]:
    """Each enabled cluster's GPU pools as (model id, backend id) pairs: one query, the clusters'
    names (rows without a model and backend) and their pools."""
    enabled = Cluster.objects.filter(enabled=True).order_by()
    no_pool = Value(None, output_field=IntegerField())
    clusters = enabled.values_list("name", no_pool, no_pool)
    of_clusters = GpuPool.objects.filter(cluster__in=enabled.values("name")).order_by()
    pools: dict[str, set[tuple[int, int]]] = {}
    for cluster, model, backend in clusters.union(
        of_clusters.values_list("cluster", "gpu_model_id", "backend_id"), all=True
    ):
        described = pools.setdefault(cluster, set())
        if model is not None:
            described.add((model, backend))
    return pools


def offerings_served(offerings: Iterable[Offering]) -> set[int]:
    """The ids of those `offerings` an allocation of which can become active: an enabled cluster
    has a GPU pool of its model and backend, or describes no pools at all (it then hosts every
    offering, as `bundle_inputs` places quota). With no enabled cluster nothing is provisioned
    yet, and every offering is taken as served: registering the first cluster provisions every
    tenant. The clusters' pools are read in one query whatever the number of offerings, and
    kept with the process's catalog rows (`catalog_kept`: a pool's or a cluster's change moves
    the catalog's version), so a decision does not read them again."""
    offerings = list(offerings)
    pools = catalog_kept("served-pools", _served_pools)
    if not pools:
        return {offering.pk for offering in offerings}
    return {
        offering.pk
        for offering in offerings
        if any(
            not pairs or (offering.gpu_model_id, offering.backend_id) in pairs
            for pairs in pools.values()
        )
    }


def offering_served(offering: Offering) -> bool:
    """Whether an allocation of `offering` can become active (see `offerings_served`)."""
    return offering.pk in offerings_served([offering])


# Which run tells most about an allocation waiting in several clusters: one that may still
# start it first, then one that failed, then one that succeeded (in a cluster not serving it).
_RUN_RANK = {RunState.RUNNING: 0, RunState.QUEUED: 1, RunState.FAILED: 2, RunState.SUCCEEDED: 3}


def _run_reason(run: ProvisioningRun, allocation: GpuRequest) -> WaitingReason:
    named = {"run": run.pk, "cluster": run.cluster.name, "tenant": allocation.tenant.slug}
    link = reverse("cluster:run", args=[run.pk])
    if run.state == RunState.RUNNING:
        message = _("Provisioning run %(run)s is applying %(tenant)s's namespace in %(cluster)s.")
        return WaitingReason(code="running", message=message % named, link=link)
    if run.state == RunState.QUEUED and run.error:
        message = _("Provisioning run %(run)s in %(cluster)s is retrying: %(error)s")
        return WaitingReason(
            code="retrying", message=message % {**named, "error": run.error}, link=link
        )
    if run.state == RunState.QUEUED:
        message = _("Provisioning run %(run)s is queued in %(cluster)s.")
        return WaitingReason(code="queued", message=message % named, link=link)
    if run.state == RunState.FAILED:
        message = _(
            "Provisioning run %(run)s failed in %(cluster)s: %(error)s (an admin retries it "
            "from the run's page)"
        )
        return WaitingReason(
            code="failed", message=message % {**named, "error": run.error}, link=link
        )
    message = _("Provisioning run %(run)s succeeded in %(cluster)s; it becomes active shortly.")
    return WaitingReason(code="starting", message=message % named, link=link)


def allocations_waiting(allocations: list[GpuRequest]) -> dict[int, WaitingReason]:
    """Why each approved allocation of `allocations` is not active yet, by id: no GPU pool
    serves its offering, no cluster is registered, or the state of the provisioning run that
    places it (queued, running, retrying, failed with its error). A run places it when the run
    was queued for it or is a bundle run of its tenant queued after its approval. Allocations in
    other states are left out. At most six queries, whatever the number of allocations."""
    approved = [row for row in allocations if row.state == RequestState.APPROVED]
    if not approved:
        return {}
    served = offerings_served({row.offering_id: row.offering for row in approved}.values())
    clusters = set(Cluster.objects.filter(enabled=True).values_list("pk", flat=True))
    ids = [row.pk for row in approved]
    linked: dict[int, set[int]] = defaultdict(set)
    links = ProvisioningRun.gpu_requests.through.objects.filter(
        gpurequest_id__in=ids, provisioningrun__cluster_id__in=clusters
    ).values_list("gpurequest_id", "provisioningrun_id")
    for allocation_id, run_id in links:
        linked[allocation_id].add(run_id)
    since = min(row.decided_at or row.created_at for row in approved)
    later = Q(kind=RunKind.BUNDLE, created_at__gte=since)
    runs = list(
        ProvisioningRun.objects.filter(
            later | Q(pk__in={run for found in linked.values() for run in found}),
            tenant_id__in={row.tenant_id for row in approved},
            cluster_id__in=clusters,
        )
        .select_related("cluster")
        .order_by("created_at", "pk")
    )
    reasons = {}
    for row in approved:
        if row.offering_id not in served:
            message = _(
                "No GPU pool serves %(offering)s, so it cannot become active: an admin adds "
                "such a pool, or revokes it."
            )
            reasons[row.pk] = WaitingReason(
                code="unserved", message=message % {"offering": row.offering.name}
            )
            continue
        if not clusters:
            message = _("No cluster is registered yet: it becomes active once an admin adds one.")
            reasons[row.pk] = WaitingReason(code="no-cluster", message=message)
            continue
        latest: dict[int, ProvisioningRun] = {}  # per cluster
        started = row.decided_at or row.created_at
        for run in runs:
            if run.tenant_id == row.tenant_id and (
                run.pk in linked[row.pk]
                or (run.kind == RunKind.BUNDLE and run.created_at >= started)
            ):
                latest[run.cluster_id] = run
        if not latest:
            message = _("No provisioning run has been queued for it yet.")
            reasons[row.pk] = WaitingReason(code="no-run", message=message)
            continue
        telling = min(latest.values(), key=lambda run: _RUN_RANK.get(RunState(run.state), 4))
        reasons[row.pk] = _run_reason(telling, row)
    return reasons


def cluster_nodes(cluster: Cluster) -> list[NodeCapacity]:
    return list(NodeCapacity.objects.filter(cluster=cluster))


def cluster_registered(name: str) -> bool:
    """Whether a cluster of this name is registered (enabled or not)."""
    return Cluster.objects.filter(name=name).exists()


def clusters_for_admin(user: User) -> QuerySet[Cluster]:
    if not user.is_portal_admin:
        raise NotFound(_("There is no such page."))
    return Cluster.objects.all()


def capacities_for(user: User) -> QuerySet[OfferingCapacity]:
    """Capacity for those who may request GPUs (members of a tenant, admins); NotFound else."""
    if not (user.is_portal_admin or tenants_of(user).exists()):
        raise NotFound(_("There is no such page."))
    return offering_capacities()


def capacity_for(user: User, **filters: str | None) -> list[CapacityRow]:
    """Capacity rows for those who may request GPUs (see capacities_for)."""
    capacities_for(user)
    return capacity_rows(**filters)


def cluster_for(user: User, name: str) -> Cluster:
    """One cluster, for admins; NotFound for everyone else."""
    cluster = clusters_for_admin(user).filter(name=name).first()
    if cluster is None:
        raise NotFound(_("There is no cluster %(name)r.") % {"name": name})
    return cluster
