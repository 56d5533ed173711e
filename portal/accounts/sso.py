"""Single sign-on: from the provider's claims to the portal's users, roles and memberships.

The mapping is applied at every sign-in: the global role from the client roles claim, and,
when the identity provider is the source of memberships, the tenant memberships from the
groups claim, added and removed to match. Each change is an audit event.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework.exceptions import AuthenticationFailed

from portal.accounts import oidc
from portal.accounts.errors import SignInRefused
from portal.accounts.groups import tenant_role_of_group
from portal.accounts.models import GlobalRole, MemberRole, SsoProfile, User
from portal.accounts.services import user_create
from portal.core.audit import audit_record
from portal.core.registry import Slot


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    """A claim by dotted path (`resource_access.{client_id}.roles`), or None. `{client_id}` is
    replaced after the split, so a client id with dots in it still names one key."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part.replace("{client_id}", settings.OIDC_CLIENT_ID))
    return value


def _sent(claims: Mapping[str, Any], path: str) -> list[str] | None:
    """The distinct strings of a list claim, sorted; None when the claims do not carry it."""
    value = _claim(claims, path)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return sorted({item for item in value if isinstance(item, str)})
    return []


# Memberships live in the tenants app, which fills these slots when it is ready:
# - `memberships_apply(user, wanted)` adds, changes and removes the user's memberships to match
#   `wanted` (tenant slug -> role) and returns the before/after change and the wanted slugs that
#   name no live tenant;
# - `has_tenant_access(user)` says whether the user is a member of a live tenant.
memberships_apply: Slot[
    Callable[[User, dict[str, MemberRole]], tuple[dict[str, list[Any]], list[str]]]
] = Slot("membership mapper", filled_by="the tenants app")
has_tenant_access: Slot[Callable[[User], bool]] = Slot(
    "tenant access check", filled_by="the tenants app"
)


@dataclass(frozen=True)
class ClaimMapping:
    """What the claims ask for, before it is checked against the tenants that exist."""

    subject: str
    username: str
    email: str
    first_name: str
    last_name: str
    groups: list[str]
    roles: list[str]
    # whether the claims carried the groups and the roles claims at all
    groups_sent: bool
    roles_sent: bool
    global_role: GlobalRole
    # tenant slug -> role; lead wins over developer
    memberships: dict[str, MemberRole] = field(default_factory=dict)
    # groups that name no tenant role
    unmatched_groups: list[str] = field(default_factory=list)


def claims_mapping(claims: Mapping[str, Any]) -> ClaimMapping:
    """Read the configured claims (OIDC_USERNAME_CLAIM, OIDC_GROUPS_CLAIM, OIDC_ROLES_CLAIM,
    PORTAL_TENANT_GROUP, OIDC_ADMIN_ROLE, OIDC_FINANCE_ROLE). Raises SignInRefused without a
    username."""
    username = _claim(claims, settings.OIDC_USERNAME_CLAIM)
    if not isinstance(username, str) or not username.strip():
        raise SignInRefused(
            _("The identity provider sent no %(claim)s claim to name you by.")
            % {"claim": repr(settings.OIDC_USERNAME_CLAIM)}
        )
    groups_sent = _sent(claims, settings.OIDC_GROUPS_CLAIM)
    roles_sent = _sent(claims, settings.OIDC_ROLES_CLAIM)
    groups, roles = groups_sent or [], roles_sent or []
    global_role = GlobalRole.NONE
    if settings.OIDC_ADMIN_ROLE in roles:
        global_role = GlobalRole.ADMIN
    elif settings.OIDC_FINANCE_ROLE in roles:
        global_role = GlobalRole.FINANCE
    memberships: dict[str, MemberRole] = {}
    unmatched = []
    for group in groups:
        tenant_role = tenant_role_of_group(settings.PORTAL_TENANT_GROUP, group)
        if tenant_role is None:
            unmatched.append(group)
            continue
        slug, role = tenant_role
        if memberships.get(slug) != MemberRole.LEAD:
            memberships[slug] = role
    return ClaimMapping(
        subject=str(claims.get("sub", "")),
        username=username.strip()[:150],
        email=str(claims.get("email") or "")[:254],
        first_name=str(claims.get("given_name") or "")[:150],
        last_name=str(claims.get("family_name") or "")[:150],
        groups=groups,
        roles=roles,
        groups_sent=groups_sent is not None,
        roles_sent=roles_sent is not None,
        global_role=global_role,
        memberships=memberships,
        unmatched_groups=unmatched,
    )


@dataclass(frozen=True)
class SignInOutcome:
    user: User
    mapping: ClaimMapping
    # False when the claims give no global role and no membership: no session is opened
    has_access: bool


def _user_for(mapping: ClaimMapping) -> User:
    profile = SsoProfile.objects.select_related("user").filter(subject=mapping.subject).first()
    if profile is not None:
        return User.objects.select_for_update().get(pk=profile.user_id)
    existing = User.objects.select_for_update().filter(username=mapping.username).first()
    if existing is None:
        return user_create(
            actor=None,
            username=mapping.username,
            email=mapping.email,
            first_name=mapping.first_name,
            last_name=mapping.last_name,
            password=None,
        )
    # A local account with a password is someone else's (or a break-glass account): the
    # provider cannot take it over by naming it.
    if existing.has_usable_password() or SsoProfile.objects.filter(user=existing).exists():
        raise SignInRefused(
            _(
                "The username %(username)s belongs to another account here. "
                "Ask an administrator to sort it out."
            )
            % {"username": repr(mapping.username)}
        )
    return existing


def _apply_global_role(user: User, role: GlobalRole) -> dict[str, list[Any]]:
    if user.global_role == role:
        return {}
    before = user.global_role
    user.global_role = role
    user.is_staff = user.is_superuser = role == GlobalRole.ADMIN
    user.save(update_fields=["global_role", "is_staff", "is_superuser"])
    return {"global_role": [before or None, role or None]}


def sso_sign_in(*, claims: Mapping[str, Any], absent_means_unknown: bool = False) -> SignInOutcome:
    """Find or create the user the checked claims name, and apply the mapping.

    The user is found by the provider's subject; on a first sign-in by a username that is not
    a local password account (or created). With `absent_means_unknown` (access tokens, which
    need not carry every claim) a missing groups or roles claim leaves the memberships or the
    global role as they are; otherwise it means none. Raises SignInRefused.
    """
    try:
        return _sign_in(claims, absent_means_unknown=absent_means_unknown)
    except IntegrityError:
        # Two first uses of one subject at once (parallel CI jobs): the other one created the
        # user; this one finds it.
        return _sign_in(claims, absent_means_unknown=absent_means_unknown)


@transaction.atomic
def _sign_in(claims: Mapping[str, Any], *, absent_means_unknown: bool) -> SignInOutcome:
    mapping = claims_mapping(claims)
    if not mapping.subject:
        raise SignInRefused(_("The identity provider sent no subject ('sub') claim."))
    user = _user_for(mapping)
    if not user.is_active:
        raise SignInRefused(_("This account is disabled here. Ask an administrator."))
    changes: dict[str, list[Any]] = {}
    profile_fields = {
        "email": mapping.email,
        "first_name": mapping.first_name,
        "last_name": mapping.last_name,
    }
    if any(value and getattr(user, name) != value for name, value in profile_fields.items()):
        for name, value in profile_fields.items():
            if value:
                setattr(user, name, value)
        user.save(update_fields=list(profile_fields))
    apply_groups = mapping.groups_sent or not absent_means_unknown
    apply_roles = mapping.roles_sent or not absent_means_unknown
    if apply_roles:
        changes |= _apply_global_role(user, mapping.global_role)
    unmatched = list(mapping.unmatched_groups)
    if apply_groups and settings.PORTAL_MEMBERSHIP_SOURCE == "identity-provider":
        membership_changes, missing = memberships_apply.get()(user, mapping.memberships)
        changes |= membership_changes
        for group in mapping.groups:
            tenant_role = tenant_role_of_group(settings.PORTAL_TENANT_GROUP, group)
            if tenant_role is not None and tenant_role[0] in missing:
                unmatched.append(group)
    seen: dict[str, Any] = {"subject": mapping.subject, "signed_in_at": timezone.now()}
    if apply_groups:
        seen |= {"groups": mapping.groups, "unmatched_groups": sorted(unmatched)}
    if apply_roles:
        seen["roles"] = mapping.roles
    SsoProfile.objects.update_or_create(user=user, defaults=seen)
    if changes:
        audit_record(
            actor=None,
            action="user.sso_mapping",
            target=user,
            changes=changes,
            comment="Applied from the identity provider's claims at sign-in.",
        )
    has_access = user.global_role != GlobalRole.NONE or has_tenant_access.get()(user)
    return SignInOutcome(user=user, mapping=mapping, has_access=has_access)


def sso_token_user(*, token: str) -> User:
    """The user a provider access token stands for, once the gateway has checked it. A subject
    seen before is that user, mapped again when the token's groups or roles differ from the last
    mapping; a new one (e.g. a service account) is signed in with the token's claims. Raises
    AuthenticationFailed."""
    claims = oidc.access_token_claims(token)
    profile = SsoProfile.objects.select_related("user").filter(subject=claims["sub"]).first()
    if profile is not None:
        if not profile.user.is_active:
            raise AuthenticationFailed(_("This account is disabled."))
        groups = _sent(claims, settings.OIDC_GROUPS_CLAIM)
        roles = _sent(claims, settings.OIDC_ROLES_CLAIM)
        if groups in (None, profile.groups) and roles in (None, profile.roles):
            return profile.user
    # New, or the token says something else than the last mapping (a role taken away from a
    # service account that never signs in through the browser): map again.
    try:
        outcome = sso_sign_in(claims=claims, absent_means_unknown=True)
    except SignInRefused as error:
        raise AuthenticationFailed(error.reason) from error
    if not outcome.has_access:
        raise AuthenticationFailed(_("The token's claims give no role in the portal."))
    return outcome.user


def sso_sign_in_start(request: HttpRequest, *, redirect_uri: str) -> HttpResponseRedirect:
    """Send the browser to the provider to sign in. Raises SignInRefused."""
    return oidc.authorization_redirect(request, redirect_uri=redirect_uri)


def sso_sign_in_finish(request: HttpRequest) -> tuple[SignInOutcome, str]:
    """Check the provider's answer, then map its claims (`sso_sign_in`): the outcome and the raw
    ID token (kept for the logout hint). Raises SignInRefused or ProviderUnavailable."""
    claims, id_token = oidc.callback_claims(request)
    return sso_sign_in(claims=claims), id_token


def sso_logout_url(*, id_token: str, post_logout_redirect_uri: str) -> str | None:
    """Where to end the provider's session too, or None when it cannot."""
    return oidc.logout_url(id_token=id_token, post_logout_redirect_uri=post_logout_redirect_uri)
