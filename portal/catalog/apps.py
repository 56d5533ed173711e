from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = "GPU catalog"
