from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClusterConfig(AppConfig):
    name = "portal.cluster"
    label = "cluster"
    verbose_name = "Kubernetes clusters and provisioning"

    def ready(self) -> None:
        from portal.allocations.decisions import served_source
        from portal.allocations.selectors import (
            capacity_source,
            served_offerings_source,
            waiting_source,
        )
        from portal.catalog.cache import catalog_keeps
        from portal.catalog.services import cluster_registered as pool_cluster_lookup
        from portal.cluster.home import cluster_home_register
        from portal.cluster.metrics import ProvisioningCollector
        from portal.cluster.models import Cluster
        from portal.cluster.receivers import provisioning_follows_tenant, provisioning_section
        from portal.cluster.selectors import (
            allocations_waiting,
            capacity_free_units,
            cluster_registered,
            offering_served,
            offerings_served,
        )
        from portal.core.metrics import collector_register
        from portal.core.navigation import nav_register
        from tenants.pages import TenantSection, tenant_sections
        from tenants.signals import tenant_changed

        tenant_changed.connect(provisioning_follows_tenant, dispatch_uid="cluster.provisioning")
        tenant_sections.register(
            "provisioning",
            TenantSection(
                "cluster/tenant_runs.html#provisioning",
                provisioning_section,
                title=_("Kubernetes namespace"),
            ),
        )
        # The request preview (allocations, below this app) shows free capacity from here.
        capacity_source.register(capacity_free_units)
        # Requests (allocations, below this app) are refused for offerings no pool serves.
        served_source.register(offering_served)
        served_offerings_source.register(offerings_served)
        # The clusters are kept with the catalog's rows in each process (a notebook list shows
        # each row's), and so is which offerings are served (`offerings_served`): a cluster's
        # change (enabled or not, added, removed) moves the catalog's version, as a GPU pool's
        # does.
        catalog_keeps(Cluster)
        # Allocations' pages say why an approved allocation is not active yet, from its runs.
        waiting_source.register(allocations_waiting)
        # A GPU pool (catalog, below this app) must name a registered cluster.
        pool_cluster_lookup.register(cluster_registered)
        collector_register(ProvisioningCollector())
        cluster_home_register()
        nav_register(_("Clusters"), "cluster:clusters", {"admin"}, position=100, group="admin")
        nav_register(_("Capacity"), "cluster:capacity", {"developer", "lead"}, position=120)
