"""The one tenant-scoped access path: who may see a tenant and what they may do in it.

Pages, the API and tasks all look tenants up here. A tenant the user may not see does not
exist for them (NotFound, 404); one they see but may not act on is PermissionDenied (403).
"""

from collections.abc import Callable
from enum import Enum

from portal.accounts.models import User
from portal.core.errors import NotFound, PermissionDenied
from tenants.models import MemberRole, Membership, Tenant
from tenants.selectors import tenants_visible_to


class Access(Enum):
    VIEW = "view"  # members, finance and admins
    REQUEST = "request"  # members and admins: ask for GPUs
    LEAD = "lead"  # the tenant's leads and admins: members, approvals
    READ_QUOTA_REQUESTS = "read quota requests"  # the tenant's leads, finance and admins
    ASK_QUOTA = "ask for quota"  # the tenant's leads only: admins set quota directly
    ADMIN = "admin"  # admins only: policy, quotas, state


# Who may do what in a tenant they can see, and what they are told when they may not.
RULES: dict[Access, tuple[Callable[[User, MemberRole | None], bool], str]] = {
    Access.VIEW: (
        lambda user, role: user.sees_all_tenants or role is not None,
        "You may not see this tenant.",
    ),
    Access.REQUEST: (
        lambda user, role: user.is_portal_admin or role is not None,
        "Only the tenant's members request GPUs in it.",
    ),
    Access.LEAD: (
        lambda user, role: user.is_portal_admin or role == MemberRole.LEAD,
        "Only the tenant's leads and admins may do this.",
    ),
    Access.READ_QUOTA_REQUESTS: (
        lambda user, role: user.sees_all_tenants or role == MemberRole.LEAD,
        "Only the tenant's leads, finance and admins see its quota requests.",
    ),
    Access.ASK_QUOTA: (
        lambda _user, role: role == MemberRole.LEAD,
        "Leads ask for more quota; admins set it on the tenant page.",
    ),
    Access.ADMIN: (lambda user, _role: user.is_portal_admin, "Only admins may do this."),
}


def role_in(user: User, tenant: Tenant) -> MemberRole | None:
    membership = Membership.objects.filter(user=user, tenant=tenant).only("role").first()
    return MemberRole(membership.role) if membership else None


def allows(user: User, tenant: Tenant, access: Access, *, role: MemberRole | None = None) -> bool:
    """Whether `user`, with `role` in `tenant` (which they can see), may do `access` there."""
    rule, _ = RULES[access]
    return rule(user, role)


def tenant_for(user: User, slug: str, access: Access = Access.VIEW) -> Tenant:
    """The tenant `slug` if `user` may see it and do `access` in it.

    Raises NotFound when the user may not see it, PermissionDenied when they see it but
    may not do `access`.
    """
    tenant = tenants_visible_to(user).filter(slug=slug).first()
    if tenant is None:
        raise NotFound(f"There is no tenant {slug!r}.")
    if access is not Access.VIEW and not allows(user, tenant, access, role=role_in(user, tenant)):
        raise PermissionDenied(RULES[access][1])
    return tenant
