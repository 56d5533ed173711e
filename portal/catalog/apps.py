from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = _("GPU catalog")

    def ready(self) -> None:
        from portal.catalog.cache import catalog_signals_connect
        from portal.core.navigation import nav_register

        catalog_signals_connect()

        nav_register(_("Catalog"), "catalog:overview", {"admin"}, position=90, group="admin")
