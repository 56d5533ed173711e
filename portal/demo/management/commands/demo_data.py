"""Load the demo: a few tenants, the personas with known passwords, the GPU catalog presets,
a few GPU pools in a `demo` cluster (dry-run, with made-up nodes for the capacity pages)
and the tenants' GPU quotas.

Safe to run again: what exists already is kept as it is, so a second run changes nothing.
"""

from typing import Any

from django.core.management.base import BaseCommand

from portal.accounts.models import GlobalRole, MemberRole, User
from portal.accounts.services import user_create
from portal.catalog.models import GpuModel, GpuPool, SharingBackend
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import gpu_pool_create
from portal.cluster.models import Cluster, ClusterMode
from portal.cluster.services import capacity_record, cluster_create
from portal.cluster.services.capacity import POOL_LABEL
from tenants.models import Quota, Tenant
from tenants.services import membership_set, quota_set, tenant_create

DEMO_PASSWORD = "gpu-portal-demo"  # noqa: S105  (printed on the console; demo only)

TENANTS = [
    ("vision", "Computer Vision Lab", "CC-4100"),
    ("nlp", "Language Models Team", "CC-4200"),
    ("risk", "Risk Analytics", "CC-7300"),
]

# username, full name, global role, (tenant, role) memberships
PERSONAS: list[tuple[str, str, GlobalRole, list[tuple[str, MemberRole]]]] = [
    ("developer", "Dana Developer", GlobalRole.NONE, [("vision", MemberRole.DEVELOPER)]),
    ("lead", "Lee Lead", GlobalRole.NONE, [("vision", MemberRole.LEAD), ("nlp", MemberRole.LEAD)]),
    ("finance", "Fin Ance", GlobalRole.FINANCE, []),
    ("admin", "Ada Admin", GlobalRole.ADMIN, []),
    ("nlp-dev", "Nia Developer", GlobalRole.NONE, [("nlp", MemberRole.DEVELOPER)]),
]


DEMO_CLUSTER = "demo"

# (pool name, GPU model, sharing backend, nodes, GPUs per node) in the demo cluster
POOLS = [
    ("a100-mig", "a100-80gb", "mig", 2, 8),
    ("a100-whole", "a100-80gb", "whole", 2, 8),
    ("h100", "h100-80gb", "whole", 1, 8),
    ("t4-shared", "t4", "time-slicing", 4, 4),
]

# What one node of each demo pool offers, as a device plugin would advertise it: the MIG
# nodes split four GPUs into 1g.10gb slices and four into 3g.40gb; T4s are shared by 4.
NODE_ALLOCATABLE = {
    "a100-mig": {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "8"},
    "a100-whole": {"nvidia.com/gpu": "8"},
    "h100": {"nvidia.com/gpu": "8"},
    "t4-shared": {"nvidia.com/gpu.shared": "16"},
}

# (tenant, GPU model, quota in GPU-eq)
QUOTAS = [
    ("vision", "a100-80gb", 8),
    ("vision", "t4", 4),
    ("nlp", "h100-80gb", 16),
    ("risk", "t4", 2),
]


class Command(BaseCommand):
    help = (
        "Load demo tenants, personas (with known passwords) and a GPU catalog; keeps existing data."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first() or cluster_create(
            actor=None,
            name=DEMO_CLUSTER,
            mode=ClusterMode.DRY_RUN,
            notebook_host_pattern="{name}.{tenant}.notebooks.localhost",
        )
        tenants = {tenant.slug: tenant for tenant in Tenant.objects.all()}
        for slug, name, cost_centre in TENANTS:
            if slug not in tenants:
                tenants[slug] = tenant_create(
                    actor=None, slug=slug, name=name, cost_centre=cost_centre
                )
        users = {user.username: user for user in User.objects.all()}
        for username, full_name, global_role, memberships in PERSONAS:
            if username in users:
                continue
            first, last = full_name.split(" ", 1)
            user = user_create(
                actor=None,
                username=username,
                email=f"{username}@example.org",
                first_name=first,
                last_name=last,
                password=DEMO_PASSWORD,
                global_role=global_role,
            )
            for slug, role in memberships:
                membership_set(actor=None, tenant=tenants[slug], user=user, role=role)
        self._catalog_and_quotas(tenants)
        self._demo_nodes(cluster)
        self.stdout.write(
            self.style.SUCCESS("Demo data is loaded. Sign in at http://127.0.0.1:8000/")
        )
        self.stdout.write(f"Every demo account's password is: {DEMO_PASSWORD}")
        for username, _, global_role, memberships in PERSONAS:
            roles = ", ".join(f"{role.label} of {slug}" for slug, role in memberships)
            self.stdout.write(f"  {username:<10} {global_role.label if global_role else roles}")

    def _catalog_and_quotas(self, tenants: dict[str, Tenant]) -> None:
        catalog_presets_load(actor=None)
        models = {model.slug: model for model in GpuModel.objects.all()}
        backends = {backend.slug: backend for backend in SharingBackend.objects.all()}
        pools = set(GpuPool.objects.filter(cluster=DEMO_CLUSTER).values_list("name", flat=True))
        for name, model, backend, nodes, gpus_per_node in POOLS:
            if name not in pools:
                gpu_pool_create(
                    actor=None,
                    cluster=DEMO_CLUSTER,
                    name=name,
                    gpu_model=models[model],
                    backend=backends[backend],
                    node_count=nodes,
                    gpus_per_node=gpus_per_node,
                )
        quotas = set(Quota.objects.values_list("tenant__slug", "gpu_model__slug"))
        for slug, model, amount in QUOTAS:
            if (slug, model) not in quotas:
                quota_set(actor=None, tenant=tenants[slug], gpu_model=models[model], gpu_eq=amount)

    def _demo_nodes(self, cluster: Cluster) -> None:
        """Made-up nodes for the dry-run cluster, so the capacity pages have something to show."""
        models = {model.slug: model for model in GpuModel.objects.all()}
        nodes = []
        for name, model, _backend, count, _gpus in POOLS:
            for index in range(count):
                labels = {
                    models[model].node_label_key: models[model].node_label_value,
                    POOL_LABEL: name,
                }
                nodes.append(
                    {
                        "metadata": {"name": f"{name}-{index}", "labels": labels},
                        "status": {"allocatable": NODE_ALLOCATABLE[name]},
                    }
                )
        capacity_record(cluster=cluster, nodes=nodes, pods=[])
