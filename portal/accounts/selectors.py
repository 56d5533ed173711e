from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from portal.accounts.groups import tenant_group
from portal.accounts.models import MemberRole, User
from portal.core.errors import NotFound


@dataclass(frozen=True)
class SignInMapping:
    """The sign-in configuration in force, as admins see it on the identity page and API."""

    sso_enabled: bool
    issuer: str
    client_id: str
    scopes: str
    username_claim: str
    groups_claim: str
    tenant_group: str
    roles_claim: str
    admin_role: str
    finance_role: str
    membership_source: str
    api_audience: str
    api_clients: list[str]
    break_glass_users: list[str]
    keycloak_sync: bool

    def example_groups(self, tenant_slug: str = "vision") -> dict[str, str]:
        return {
            role: tenant_group(self.tenant_group, tenant_slug, role) for role in MemberRole.values
        }


def sign_in_mapping() -> SignInMapping:
    return SignInMapping(
        sso_enabled=settings.SSO_ENABLED,
        issuer=settings.OIDC_ISSUER_URL,
        client_id=settings.OIDC_CLIENT_ID,
        scopes=settings.OIDC_SCOPES,
        username_claim=settings.OIDC_USERNAME_CLAIM,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        tenant_group=settings.PORTAL_TENANT_GROUP,
        roles_claim=settings.OIDC_ROLES_CLAIM,
        admin_role=settings.OIDC_ADMIN_ROLE,
        finance_role=settings.OIDC_FINANCE_ROLE,
        membership_source=settings.PORTAL_MEMBERSHIP_SOURCE,
        api_audience=settings.OIDC_API_AUDIENCE,
        api_clients=list(settings.OIDC_API_CLIENTS),
        break_glass_users=list(settings.PORTAL_BREAK_GLASS_USERS),
        keycloak_sync=settings.KEYCLOAK_SYNC,
    )


def sign_in_mapping_for(user: User) -> SignInMapping:
    """The mapping in force, for admins; NotFound for everyone else."""
    _admins_only(user)
    return sign_in_mapping()


def _admins_only(user: User) -> None:
    if not user.is_portal_admin:
        raise NotFound(_("There is no such page."))


def users_for_identity(user: User) -> QuerySet[User]:
    """For admins (NotFound for everyone else): every user with their last sign-in mapping and
    memberships, in three queries a page."""
    _admins_only(user)
    return (
        User.objects.select_related("sso")
        .prefetch_related("memberships__tenant")
        .order_by("username")
    )


def emails_by_language(emails: list[str]) -> dict[str, list[str]]:
    """`emails` grouped by the language their owners saved on their profile (the site's
    default where none is saved), so each group gets one message in its readers' words."""
    saved = dict(
        User.objects.filter(email__in=emails).exclude(language="").values_list("email", "language")
    )
    groups: dict[str, list[str]] = {}
    for email in emails:
        groups.setdefault(saved.get(email) or settings.LANGUAGE_CODE, []).append(email)
    return groups
