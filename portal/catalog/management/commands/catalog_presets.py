from typing import Any

from django.core.management.base import BaseCommand

from portal.catalog.presets import catalog_presets_load

_KINDS = {
    "backends": "sharing backends",
    "models": "GPU models",
    "offerings": "offerings",
    "images": "notebook images",
}


class Command(BaseCommand):
    help = (
        "Load the GPU catalog presets (models, sharing backends, offerings for every supported "
        "backend, notebook images). Existing entries, matched by slug, are left as they are."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        # A system write: the audit events name no actor, as for other commands run by an admin.
        created = catalog_presets_load(actor=None)
        if not any(created.values()):
            self.stdout.write("Catalog presets: nothing to create, every preset exists already.")
            return
        summary = ", ".join(f"{created[kind]} {label}" for kind, label in _KINDS.items())
        self.stdout.write(self.style.SUCCESS(f"Catalog presets loaded: created {summary}."))
