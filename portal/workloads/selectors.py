"""Reads of notebooks, narrowed to who may see them: one path for pages, API and tasks.

A notebook is visible to its owner, to the leads of its tenant and to admins
(`Notebook.objects.visible_to`); everyone else gets NotFound (404), as if it did not exist.
Whoever sees a notebook may stop, start and delete it (DOMAIN.md: own notebooks; leads their
tenant's; admins any).
"""

from collections.abc import Iterable

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.catalog.models import GpuPool, NotebookImage, Offering
from portal.cluster.models import Cluster, ProvisioningRun
from portal.core.errors import ValidationFailed
from portal.core.visibility import VisibleQuerySet, get_visible_or_404
from portal.workloads.manifests import NotebookSpec, notebook_host
from portal.workloads.models import Desired, Notebook, NotebookState
from tenants.access import tenants_of
from tenants.models import TenantState


def _notebooks() -> VisibleQuerySet[Notebook]:
    # The cluster, the image, the offering and the GPU model (a handful of rows each) from the
    # process's catalog rows (`portal.catalog.cache`), not joined: PostgreSQL's planning time
    # grows steeply with the tables of one join (make bench, `notebooks/`: 4.3 ms to plan the
    # six tables of notebook, tenant, owner, allocation, offering and GPU model, more than to
    # read them).
    return Notebook.objects.select_related("tenant", "owner", "allocation").prefetch_related(
        "cluster", "image", "allocation__offering", "allocation__offering__gpu_model"
    )


def notebooks_for(user: User) -> QuerySet[Notebook]:
    """The notebooks `user` may see (`Notebook.objects.visible_to`), with what a list shows:
    not their Kubernetes events (a JSON list each, shown on a notebook's own page only)."""
    return _notebooks().defer("events").visible_to(user)


def notebook_for(user: User, pk: int) -> Notebook:
    return get_visible_or_404(_notebooks(), user, pk=pk)


def _own_allocations(user: User) -> VisibleQuerySet[GpuRequest]:
    """The user's own requests, in tenants they are (still) a member of; admins' anywhere."""
    mine = GpuRequest.objects.filter(requester=user)
    return mine if user.is_portal_admin else mine.filter(tenant__in=tenants_of(user))


def launchable_allocations(user: User) -> QuerySet[GpuRequest]:
    """The user's own allocations a notebook may start on: approved or active (or pending: it
    starts once approved), in active tenants, without a notebook yet."""
    taken = Notebook.objects.exclude(state=NotebookState.DELETED).values("allocation")
    return (
        _own_allocations(user)
        .visible_to(user)
        .filter(
            state__in=(*HOLDING_STATES, RequestState.PENDING),
            tenant__state=TenantState.ACTIVE,
        )
        .exclude(pk__in=taken)
        .select_related("tenant", "offering__gpu_model")
        .order_by("-created_at", "-id")
    )


def allocation_for_launch(user: User, pk: int) -> GpuRequest:
    """One of the user's own requests, in a tenant they are a member of; another user's or
    tenant's is NotFound (404)."""
    allocations = _own_allocations(user).select_related(
        "tenant", "offering__gpu_model", "offering__backend"
    )
    return get_visible_or_404(allocations, user, pk=pk)


def images_for_launch() -> QuerySet[NotebookImage]:
    return NotebookImage.objects.filter(enabled=True)


def image_for_launch(slug: str, offering: Offering) -> NotebookImage:
    """The enabled image `slug` if it suits the offering's GPU vendor; else a field error."""
    image = images_for_launch().filter(slug=slug).first()
    if image is None:
        raise ValidationFailed.on(
            "image", _("%(slug)r is not on the list of notebook images.") % {"slug": slug}
        )
    vendor = offering.gpu_model.vendor
    if not image.suits(vendor):
        raise ValidationFailed.on(
            "image",
            _("%(image)s does not suit %(vendor)s GPUs; pick one made for them.")
            % {"image": image.name, "vendor": vendor},
        )
    return image


def cluster_for_offering(offering: Offering) -> Cluster:
    """The enabled cluster that runs `offering`: the first with a pool of its model and
    backend, else the first that describes no pools (it hosts every offering)."""
    clusters = list(Cluster.objects.filter(enabled=True).order_by("name"))
    pools = GpuPool.objects.filter(cluster__in=[cluster.name for cluster in clusters])
    described = set(pools.values_list("cluster", flat=True))
    serving = set(
        pools.filter(gpu_model=offering.gpu_model_id, backend=offering.backend_id).values_list(
            "cluster", flat=True
        )
    )
    for cluster in clusters:
        if cluster.name in serving:
            return cluster
    for cluster in clusters:
        if cluster.name not in described:
            return cluster
    raise ValidationFailed.on(
        "offering", _("No enabled cluster runs %(offering)s.") % {"offering": offering.name}
    )


def _host(notebook: Notebook) -> str:
    return notebook_host(
        notebook.cluster.notebook_host_pattern,
        name=notebook.kubernetes_name,
        tenant_slug=notebook.tenant.slug,
    )


def notebook_runs(notebook: Notebook, *, limit: int) -> list[ProvisioningRun]:
    """The notebook's latest provisioning runs, newest first (one query)."""
    runs = notebook.provisioning_runs.select_related("cluster").order_by("-created_at", "-id")
    return list(runs[:limit])


def notebook_spec(notebook: Notebook) -> NotebookSpec:
    """What the notebook's objects are rendered from. Stopped unless the owner wants it
    running, its allocation holds quota and its tenant is active."""
    offering = notebook.allocation.offering
    model = offering.gpu_model
    cluster = notebook.cluster
    name = notebook.kubernetes_name
    runs = (
        notebook.desired == Desired.RUNNING
        and notebook.allocation.state in HOLDING_STATES
        and notebook.tenant.state == TenantState.ACTIVE
    )
    return NotebookSpec(
        name=name,
        namespace=cluster.namespace_for(notebook.tenant.slug),
        tenant_slug=notebook.tenant.slug,
        owner=notebook.owner.username,
        image=notebook.image_reference,
        cpu_cores=notebook.cpu_cores,
        memory_gib=notebook.memory_gib,
        workspace_gib=notebook.workspace_gib,
        gpu_resources=offering.resources,
        gpu_units=notebook.allocation.count,
        annotations=offering.annotations,
        node_selector={model.node_label_key: model.node_label_value},
        running=runs,
        token=notebook.token,
        host=_host(notebook),
        ingress_class=cluster.notebook_ingress_class,
    )


def notebook_url(notebook: Notebook) -> str:
    """Where the notebook is published (its token is added for the owner only); empty without
    a host pattern."""
    host = _host(notebook)
    return f"{notebook.cluster.notebook_url_scheme}://{host}/lab" if host else ""


def notebooks_by_pk(ids: Iterable[int]) -> dict[int, Notebook]:
    return {notebook.pk: notebook for notebook in _notebooks().filter(pk__in=list(ids))}
