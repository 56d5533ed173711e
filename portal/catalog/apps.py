from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = "GPU catalog"

    def ready(self) -> None:
        from portal.core.navigation import nav_register

        nav_register("Catalog", "catalog:overview", {"admin"}, position=90)
