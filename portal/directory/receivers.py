"""How the directory sync follows tenants; connected in DirectoryConfig.ready()."""

from typing import Any

from portal.directory.services import directory_member_queue, directory_tenant_queue
from tenants.models import Tenant


def groups_follow_new_tenant(
    sender: object, *, tenant: Tenant, actor: Any, **kwargs: object
) -> None:
    """A tenant was created: queue its groups, in the same transaction."""
    directory_tenant_queue(tenant_slug=tenant.slug, actor=actor)


def group_follows_membership(
    sender: object, *, tenant: Tenant, username: str, role: str, actor: Any, **kwargs: object
) -> None:
    """A membership was added, changed or removed (role ""): queue the member's group change."""
    directory_member_queue(tenant_slug=tenant.slug, username=username, role=role, actor=actor)
