from django.core.exceptions import ValidationError
from django.db import transaction

from portal.accounts.models import User
from portal.core.errors import Conflict, ValidationFailed
from tenants.models import MemberRole, Membership, Tenant


@transaction.atomic
def tenant_create(*, slug: str, name: str, cost_centre: str = "") -> Tenant:
    """Create an active tenant. Raises ValidationFailed for a bad slug, Conflict if it is taken."""
    tenant = Tenant(slug=slug, name=name, cost_centre=cost_centre)
    try:
        tenant.full_clean(validate_unique=False)
    except ValidationError as error:
        raise ValidationFailed("The tenant is not valid.", fields=error.message_dict) from None
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"A tenant {slug!r} exists already.", fields={"slug": ["taken"]})
    tenant.save()
    return tenant


@transaction.atomic
def membership_set(*, tenant: Tenant, user: User, role: MemberRole) -> Membership:
    """Make `user` a member of `tenant` with `role`, adding or changing the membership."""
    membership, _ = Membership.objects.update_or_create(
        tenant=tenant, user=user, defaults={"role": role}
    )
    return membership
