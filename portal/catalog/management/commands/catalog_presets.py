from typing import Any

from django.core.management.base import BaseCommand

from portal.catalog.presets import catalog_presets_load


class Command(BaseCommand):
    help = (
        "Load the GPU catalog presets (models, sharing backends, offerings for every supported "
        "backend). Existing entries, matched by slug, are left as they are."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        created = catalog_presets_load(actor=None)
        summary = ", ".join(f"{count} {kind}" for kind, count in created.items())
        self.stdout.write(self.style.SUCCESS(f"Catalog presets loaded: created {summary}."))
