from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        from portal.accounts import sso
        from portal.core import navigation
        from tenants import access  # noqa: F401  (registers the visibility scopes)
        from tenants.home import tenants_home_register
        from tenants.selectors import has_tenant_access, persona_of
        from tenants.services import memberships_apply_from_provider

        sso.memberships_apply.register(memberships_apply_from_provider)
        sso.has_tenant_access.register(has_tenant_access)
        navigation.persona_resolver.register(persona_of)
        tenants_home_register()
        members = {"developer", "lead", "admin"}
        navigation.nav_register(_("My workspace"), "tenants:mine", members, position=10)
        navigation.nav_register(_("Team"), "tenants:team", {"lead"}, position=50, group="team")
        navigation.nav_register(
            _("Tenants"), "tenants:manage", {"admin"}, position=70, group="admin"
        )
        navigation.nav_register(
            _("Quota requests"), "tenants:quota-queue", {"admin"}, position=80, group="admin"
        )
