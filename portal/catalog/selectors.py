"""Reads of the catalog that depend on who asks."""

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.catalog.models import NotebookImage


def notebook_images_visible_to(user: User) -> QuerySet[NotebookImage]:
    """Admins: every notebook image; everyone else: the enabled ones, which they may launch."""
    images = NotebookImage.objects.all()
    if user.is_portal_admin:
        return images
    return images.filter(enabled=True)
