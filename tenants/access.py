"""The one tenant-scoped access path: who may see a tenant, what they may do in it, and so
which rows of every tenant-owned model they see.

`RULES` says what a role allows; the building blocks below turn it into querysets (the
tenants a user sees, the tenants they lead, whether they see everything), and every
tenant-owned model's `visible_to(user)` is built on them (portal.core.visibility). Pages, the
API and tasks look objects up through `visible_to` and `get_visible_or_404`. A tenant the user
may not see does not exist for them (NotFound, 404); one they see but may not act on is
PermissionDenied (403).
"""

from collections.abc import Callable
from enum import Enum
from typing import Any

from django.db.models import Model, OuterRef, Q, QuerySet, Subquery
from django.db.models.signals import post_delete, post_save
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.errors import NotFound, PermissionDenied
from portal.core.models import AuditEvent
from portal.core.prepared import KeptRows, KeyedRead
from portal.core.visibility import any_of, not_found_message, register_scope
from tenants.models import MemberRole, Membership, Quota, QuotaRequest, Tenant


class Access(Enum):
    VIEW = "view"  # members, finance and admins
    REQUEST = "request"  # members and admins: ask for GPUs
    LEAD = "lead"  # the tenant's leads and admins: members, approvals
    READ_QUOTA_REQUESTS = "read quota requests"  # the tenant's leads, finance and admins
    ASK_QUOTA = "ask for quota"  # the tenant's leads only: admins set quota directly
    ADMIN = "admin"  # admins only: policy, quotas, state


# Who may do what in a tenant they can see, and what they are told when they may not.
RULES: dict[Access, tuple[Callable[[User, MemberRole | None], bool], str | Promise]] = {
    Access.VIEW: (
        lambda user, role: user.sees_all_tenants or role is not None,
        _("You may not see this tenant."),
    ),
    Access.REQUEST: (
        lambda user, role: user.is_portal_admin or role is not None,
        _("Only the tenant's members request GPUs in it."),
    ),
    Access.LEAD: (
        lambda user, role: user.is_portal_admin or role == MemberRole.LEAD,
        _("Only the tenant's leads and admins may do this."),
    ),
    Access.READ_QUOTA_REQUESTS: (
        lambda user, role: user.sees_all_tenants or role == MemberRole.LEAD,
        _("Only the tenant's leads, finance and admins see its quota requests."),
    ),
    Access.ASK_QUOTA: (
        lambda _user, role: role == MemberRole.LEAD,
        _("Leads ask for more quota; admins set it on the tenant page."),
    ),
    Access.ADMIN: (lambda user, _role: user.is_portal_admin, _("Only admins may do this.")),
}


def role_in(user: User, tenant: Tenant) -> MemberRole | None:
    """The user's role in `tenant`, from their roles read once for their request."""
    role = _roles_by_tenant(user).get(tenant.pk)
    return MemberRole(role) if role else None


def allows(user: User, tenant: Tenant, access: Access, *, role: MemberRole | None = None) -> bool:
    """Whether `user`, with `role` in `tenant` (which they can see), may do `access` there."""
    rule, _message = RULES[access]
    return rule(user, role)


# The building blocks of every model's visibility.


def sees_everything(user: User) -> bool:
    """Finance and admins see every tenant and everything in it (read-only for finance)."""
    return user.sees_all_tenants


def allowed_everywhere(user: User, access: Access = Access.VIEW) -> bool:
    """Whether `user` may do `access` in every tenant, member or not (a global role)."""
    rule, _message = RULES[access]
    return rule(user, None)


def _tenants_with_role(user: User, roles: list[MemberRole]) -> QuerySet[Tenant]:
    # A subquery, not a join: annotations over memberships then count every member.
    memberships = Membership.objects.filter(user=user)
    if set(roles) != set(MemberRole):
        memberships = memberships.filter(role__in=roles)
    return Tenant.objects.filter(pk__in=memberships.values("tenant"))


# Bumped whenever a membership is saved or deleted in this process: a user object's cached
# tenant ids (`_roles_by_tenant`) are read again after it. A user object lives for one request
# (or one task), so a change made by another process shows from the next request.
_membership_generation = 0


def _membership_changed(**_kwargs: object) -> None:
    global _membership_generation  # noqa: PLW0603 - a process-wide counter, by design
    _membership_generation += 1


post_save.connect(_membership_changed, sender=Membership, dispatch_uid="access-membership-save")
post_delete.connect(_membership_changed, sender=Membership, dispatch_uid="access-membership-del")


def _roles_of(user_id: int) -> QuerySet[Membership, tuple[int, str]]:
    # Unordered: the model's ordering (tenant slug, username) would join both tables for nothing.
    return Membership.objects.filter(user_id=user_id).order_by().values_list("tenant_id", "role")


# Read on nearly every call (the visibility of its lists, the navigation): its SQL built once.
_ROLES = KeptRows(Membership, _roles_of)


def _roles_by_tenant(user: User) -> dict[int, str]:
    """The user's role in each of their tenants: one query, then kept on the user object."""
    cached = user.__dict__.get("_portal_roles_by_tenant")
    if cached is not None and cached[0] == _membership_generation:
        roles: dict[int, str] = cached[1]
        return roles
    generation = _membership_generation
    roles = dict(_ROLES.rows(user.pk)) if user.pk is not None else {}
    user.__dict__["_portal_roles_by_tenant"] = (generation, roles)
    return roles


def tenant_ids_of(user: User, roles: list[MemberRole] | None = None) -> list[int]:
    """The ids of the tenants where `user` has one of `roles` (any role when None)."""
    wanted = None if roles is None else {str(role) for role in roles}
    return sorted(
        tenant
        for tenant, role in _roles_by_tenant(user).items()
        if wanted is None or role in wanted
    )


def in_tenants_of_user(
    user: User, roles: list[MemberRole] | None = None, *, path: str = "tenant"
) -> Q:
    """A filter on `path` (a tenant foreign key): rows of the tenants where `user` has one of
    `roles`, as a list of ids read first. Beside an OR (one's own rows or a led tenant's) a
    subquery would hide from PostgreSQL's planner how few tenants that is: it then walks the
    whole table in the list's order. With the ids it uses the per-branch indexes, and for a
    user who leads nothing the branch drops out of the query."""
    return Q(**{f"{path}__in": tenant_ids_of(user, roles)})


# The most tenants read as branches of their own (see `tenant_branches`); a user with more has
# them read as one branch, where their rows are common enough for the newest-first index.
MAX_TENANT_BRANCHES = 10


def tenant_branches(
    user: User, roles: list[MemberRole] | None = None, *, path: str = "tenant"
) -> list[Q]:
    """`in_tenants_of_user` as one filter per tenant (up to `MAX_TENANT_BRANCHES`, else one
    for them all; none for no tenant): the branches of a visibility filter (`any_of`), each of
    which PostgreSQL reads in a list's order from an index that starts with the tenant."""
    ids = tenant_ids_of(user, roles)
    if len(ids) > MAX_TENANT_BRANCHES:
        return [Q(**{f"{path}__in": ids})]
    return [Q(**{path: tenant}) for tenant in ids]


def own_or_led[M: Model](
    rows: QuerySet[M], user: User, own: Q, *, path: str = "tenant"
) -> QuerySet[M]:
    """`rows` that are `user`'s own (`own`) or in a tenant they lead (reached by `path`): the
    scope of a lead's lists, declared with its branches (`any_of`) so that a page reads each
    from its own index."""
    led = in_tenants_of_user(user, [MemberRole.LEAD], path=path)
    return any_of(rows, own | led, [own, *tenant_branches(user, [MemberRole.LEAD], path=path)])


def tenants_of(user: User) -> QuerySet[Tenant]:
    """The tenants `user` is a member of, in any role, whatever their global role."""
    return _tenants_with_role(user, list(MemberRole))


def tenants_led_by(user: User) -> QuerySet[Tenant]:
    """The tenants `user` leads, whatever their global role."""
    return _tenants_with_role(user, [MemberRole.LEAD])


def tenants_led_first(user: User, count: int) -> list[Tenant]:
    """The first `count` tenants `user` leads, by slug, for the panels of a lead's home that
    each show a few of them: kept on the user object as their roles are (read again for more
    than were read, or after a membership changed), so a request reads them once."""
    cached = user.__dict__.get("_portal_led_first")
    if cached is not None and cached[0] == _membership_generation and cached[1] >= count:
        first: list[Tenant] = cached[2][:count]
        return first
    generation = _membership_generation
    first = list(tenants_led_by(user).order_by("slug")[:count])
    user.__dict__["_portal_led_first"] = (generation, count, first)
    return first


def tenants_where(user: User, access: Access = Access.VIEW) -> QuerySet[Tenant]:
    """The tenants in which `user` may do `access`, by the same RULES as `allows`: every
    tenant for a global role that allows it, else those where their role does."""
    if allowed_everywhere(user, access):
        return Tenant.objects.all()
    return _tenants_with_role(user, [role for role in MemberRole if RULES[access][0](user, role)])


def in_tenants_where[M: Model](
    rows: QuerySet[M], user: User, access: Access = Access.VIEW, *, path: str = "tenant"
) -> QuerySet[M]:
    """`rows` whose tenant (reached by `path`) lets `user` do `access`."""
    if allowed_everywhere(user, access):
        return rows
    return rows.filter(**{f"{path}__in": tenants_where(user, access)})


# A tenant page and each of its sections read their tenant by slug: the SQL built once.
_TENANT_BY_SLUG = KeyedRead(Tenant, "slug")


def tenant_for(user: User, slug: str, access: Access = Access.VIEW) -> Tenant:
    """The tenant `slug` if `user` may see it and do `access` in it. To see it: the tenant by
    its slug, then the user's roles (read once for the user's request) say whether they see it,
    as the tenants' visibility says (every tenant for a global role, else their own). To do
    more: the tenant with the caller's role, one query.

    Raises NotFound when the user may not see it, PermissionDenied when they see it but
    may not do `access`.
    """
    if access is not Access.VIEW:
        # A write: the caller's role read with the tenant, in the same query.
        # Unordered: the memberships' ordering (tenant slug, username) would join both tables.
        memberships = Membership.objects.filter(user=user, tenant=OuterRef("pk")).order_by()
        role_there = Subquery(memberships.values("role")[:1])
        found: Any = Tenant.objects.annotate(caller_role=role_there).filter(slug=slug).first()
        if found is None or not (allowed_everywhere(user) or found.caller_role):
            raise NotFound(not_found_message(Tenant, slug=slug))
        role = MemberRole(found.caller_role) if found.caller_role else None
        if not allows(user, found, access, role=role):
            raise PermissionDenied(str(RULES[access][1]))
        written: Tenant = found
        return written
    tenant = _TENANT_BY_SLUG.get(slug)
    if tenant is None or not (allowed_everywhere(user) or tenant.pk in _roles_by_tenant(user)):
        raise NotFound(not_found_message(Tenant, slug=slug))
    return tenant


# The scopes of the tenants app's models, and of core's audit events (core knows no tenants).


def _visible_tenants(tenants: QuerySet[Tenant], user: User) -> QuerySet[Tenant]:
    """Every tenant for admins and finance; otherwise the tenants the user is a member of."""
    return in_tenants_where(tenants, user, path="pk")


def _visible_memberships(memberships: QuerySet[Membership], user: User) -> QuerySet[Membership]:
    """The members of the tenants the user sees."""
    return in_tenants_where(memberships, user)


def _visible_quotas(quotas: QuerySet[Quota], user: User) -> QuerySet[Quota]:
    """The quotas of the tenants the user sees."""
    return in_tenants_where(quotas, user)


def _visible_quota_requests(requests: QuerySet[QuotaRequest], user: User) -> QuerySet[QuotaRequest]:
    """The tenant's leads, finance and admins."""
    return in_tenants_where(requests, user, Access.READ_QUOTA_REQUESTS)


def _visible_audit_events(events: QuerySet[AuditEvent], user: User) -> QuerySet[AuditEvent]:
    """Finance and admins: everything; leads: their tenants' events and their own actions;
    everyone else: their own actions."""
    if sees_everything(user):
        return events
    return own_or_led(events, user, Q(actor=user))


register_scope(Tenant, _visible_tenants)
register_scope(Membership, _visible_memberships)
register_scope(Quota, _visible_quotas)
register_scope(QuotaRequest, _visible_quota_requests)
register_scope(AuditEvent, _visible_audit_events)
