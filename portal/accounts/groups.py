"""The identity-provider groups that stand for tenant roles (`/gpu-portal/tenants/vision/leads`).

One template (`PORTAL_TENANT_GROUP`, with `{tenant}` and `{role}`) names them everywhere: the
sign-in mapping reads them from the groups claim, the tenant bundle's RoleBindings bind them,
and the Keycloak sync creates them.
"""

import re
from functools import cache

from portal.accounts.models import MemberRole

# A role's group is named with the role in the plural: `leads`, `developers`.
ROLE_OF_GROUP = {f"{role}s": MemberRole(role) for role in MemberRole.values}


def tenant_group(template: str, tenant_slug: str, role: str) -> str:
    """The group whose members hold `role` (`lead` or `developer`) in the tenant."""
    return template.format(tenant=tenant_slug, role=f"{role}s")


@cache
def _pattern(template: str) -> re.Pattern[str]:
    head, _, rest = template.partition("{tenant}")
    parts = [re.escape(part) for part in (head, *rest.split("{role}"))]
    tenant = r"(?P<tenant>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)"
    role = r"(?P<role>" + "|".join(ROLE_OF_GROUP) + ")"
    if template.index("{tenant}") < template.index("{role}"):
        return re.compile(parts[0] + tenant + parts[1] + role + parts[2])
    head, _, rest = template.partition("{role}")
    parts = [re.escape(part) for part in (head, *rest.split("{tenant}"))]
    return re.compile(parts[0] + role + parts[1] + tenant + parts[2])


def tenant_role_of_group(template: str, group: str) -> tuple[str, MemberRole] | None:
    """`(tenant slug, role)` when `group` is a tenant role group under `template`, else None."""
    match = _pattern(template).fullmatch(group)
    if match is None:
        return None
    return match["tenant"], ROLE_OF_GROUP[match["role"]]
