from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo data loader (`manage.py demo_data`). It sits above every other app: it fills
    them all, and nothing imports it."""

    name = "portal.demo"
    label = "demo"
    verbose_name = "Demo data"
