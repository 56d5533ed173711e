from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WorkloadsConfig(AppConfig):
    name = "portal.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from portal.allocations.signals import allocation_state_changed
        from portal.cluster.models import RunKind
        from portal.cluster.services.runs import RunKindHandler, run_kinds
        from portal.core.navigation import nav_register
        from portal.workloads.home import workloads_home_register
        from portal.workloads.provisioning import notebook_run_sync
        from portal.workloads.receivers import (
            notebooks_follow_allocation_state,
            notebooks_follow_tenant_state,
        )
        from portal.workloads.services import notebook_run_finished
        from tenants.signals import tenant_state_changed

        tenant_state_changed.connect(notebooks_follow_tenant_state, dispatch_uid="workloads")
        allocation_state_changed.connect(
            notebooks_follow_allocation_state, dispatch_uid="workloads"
        )
        run_kinds.register(
            RunKind.NOTEBOOK,
            RunKindHandler(sync=notebook_run_sync, finished=notebook_run_finished),
        )
        workloads_home_register()
        nav_register(_("Notebooks"), "workloads:list", {"developer", "lead", "admin"}, position=20)
