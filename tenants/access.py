"""The one tenant-scoped access path: who may see a tenant and what they may do in it.

Pages, the API and tasks all look tenants up here. A tenant the user may not see does not
exist for them (NotFound, 404); one they see but may not act on is PermissionDenied (403).
"""

from enum import Enum

from portal.accounts.models import User
from portal.core.errors import NotFound, PermissionDenied
from tenants.models import MemberRole, Membership, Tenant
from tenants.selectors import tenants_visible_to


class Access(Enum):
    VIEW = "view"  # members, finance and admins
    REQUEST = "request"  # members and admins: ask for GPUs
    LEAD = "lead"  # the tenant's leads and admins: members, approvals, quota requests
    ADMIN = "admin"  # admins only: policy, quotas, state


def role_in(user: User, tenant: Tenant) -> MemberRole | None:
    membership = Membership.objects.filter(user=user, tenant=tenant).only("role").first()
    return MemberRole(membership.role) if membership else None


def allows(user: User, tenant: Tenant, access: Access, *, role: MemberRole | None = None) -> bool:
    """Whether `user` may do `access` in `tenant` (which they can see)."""
    if user.is_portal_admin:
        return True
    if access is Access.VIEW:
        return user.is_finance or role is not None
    if access is Access.REQUEST:
        return role is not None
    if access is Access.LEAD:
        return role == MemberRole.LEAD
    return False


def tenant_for(user: User, slug: str, access: Access = Access.VIEW) -> Tenant:
    """The tenant `slug` if `user` may see it and do `access` in it.

    Raises NotFound when the user may not see it, PermissionDenied when they see it but
    may not do `access`.
    """
    tenant = tenants_visible_to(user).filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"There is no tenant {slug!r}.")
    if access is not Access.VIEW and not allows(user, tenant, access, role=role_in(user, tenant)):
        raise PermissionDenied(f"You may not do this in tenant {slug!r}.")
    return tenant
