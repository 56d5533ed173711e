from django.urls import reverse

from portal.accounts.models import User
from tenants.models import MemberRole, Membership


def persona_of(user: User) -> str:
    """The user's main persona: the first of admin, finance, lead, developer that they are."""
    if user.is_portal_admin:
        return "admin"
    if user.is_finance:
        return "finance"
    if Membership.objects.filter(user=user, role=MemberRole.LEAD).exists():
        return "lead"
    return "developer"


START_PAGES = {
    "admin": "tenants:manage",
    "finance": "tenants:finance",
    "lead": "tenants:team",
    "developer": "tenants:mine",
}


def start_url_for(user: User) -> str:
    return reverse(START_PAGES[persona_of(user)])
