from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "portal.cluster"
    label = "cluster"
    verbose_name = "Kubernetes clusters and provisioning"

    def ready(self) -> None:
        from portal.allocations.selectors import register_capacity_source
        from portal.cluster.selectors import capacity_free_units

        # The request preview (allocations, below this app) shows free capacity from here.
        register_capacity_source(capacity_free_units)
