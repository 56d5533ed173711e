from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AllocationsConfig(AppConfig):
    name = "portal.allocations"
    label = "allocations"
    verbose_name = _("GPU requests and allocations")

    def ready(self) -> None:
        from portal.allocations.home import allocations_home_register
        from portal.allocations.ledger import allocations_holding as holding_reader
        from portal.allocations.ledger import gpu_eq_held_by, gpu_eq_maybe_over
        from portal.allocations.receivers import allocations_follow_tenant_state
        from portal.allocations.selectors import pending_approvals_count
        from portal.core.navigation import nav_register
        from tenants.selectors import allocations_held, allocations_holding, allocations_over
        from tenants.signals import tenant_state_changed

        allocations_home_register()
        allocations_held.register(gpu_eq_held_by)
        allocations_holding.register(holding_reader)
        allocations_over.register(gpu_eq_maybe_over)
        # Before the workloads app's receiver (apps are ready in INSTALLED_APPS order): the
        # allocations end first, and their notebooks stop with them.
        tenant_state_changed.connect(allocations_follow_tenant_state, dispatch_uid="allocations")
        # The labels are translated where the navigation renders them (core.navigation).
        everyone_who_requests = {"developer", "lead", "admin"}
        nav_register(_("My requests"), "allocations:mine", everyone_who_requests, position=30)
        nav_register(
            _("Approvals"),
            "allocations:approvals",
            {"lead", "admin"},
            position=40,
            group="team",
            count=pending_approvals_count,
        )
        nav_register(
            _("All requests"),
            "allocations:all",
            {"finance", "admin"},
            position=130,
            group="records",
        )
