from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MeteringConfig(AppConfig):
    name = "portal.metering"
    label = "metering"
    verbose_name = "Metering"

    def ready(self) -> None:
        from portal.core.metrics import collector_register
        from portal.core.navigation import nav_register
        from portal.metering.activity import notebook_activity
        from portal.metering.home import metering_home_register
        from portal.metering.metrics import MeteringCollector
        from portal.workloads.culling import activity_source
        from tenants.pages import TenantSection, tenant_sections

        collector_register(MeteringCollector())
        metering_home_register()
        activity_source.register(notebook_activity)
        # The tenant page links its leads (and finance, admins) to the tenant's usage.
        tenant_sections.register(
            "usage", TenantSection("metering/tenant_link.html#usage-link", lambda _tenant: {})
        )
        # Admins reach their own usage from *Usage*; their navigation is long enough.
        nav_register(_("My usage"), "metering:mine", {"developer", "lead"}, position=35)
        nav_register(_("Usage"), "metering:all", {"finance", "admin"}, position=65, group="money")
