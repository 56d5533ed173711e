from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = _("GPU catalog")

    def ready(self) -> None:
        from portal.core.navigation import nav_register

        nav_register(_("Catalog"), "catalog:overview", {"admin"}, position=90, group="admin")
