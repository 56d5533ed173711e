from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    name = "portal.allocations"
    label = "allocations"
    verbose_name = "GPU requests and allocations"

    def ready(self) -> None:
        from portal.allocations.ledger import gpu_eq_held_by
        from portal.core.navigation import nav_register
        from tenants.selectors import allocations_held

        allocations_held.register(gpu_eq_held_by)
        everyone_who_requests = {"developer", "lead", "admin"}
        nav_register("My requests", "allocations:mine", everyone_who_requests, position=30)
        nav_register("Approvals", "allocations:approvals", {"lead", "admin"}, position=40)
        nav_register("All requests", "allocations:all", {"finance", "admin"}, position=130)
