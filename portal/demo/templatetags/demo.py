"""`{% demo_accounts %}`: the demo's accounts on the sign-in page, only when PORTAL_DEMO is on.

A template tag rather than the sign-in view's context, because the accounts app sits below the
demo and must not know about it.
"""

from django import template
from django.conf import settings
from django.utils.translation import gettext as _

from portal.demo.accounts import DEMO_PASSWORD, PERSONAS

register = template.Library()


@register.inclusion_tag("demo/sign_in_accounts.html")
def demo_accounts() -> dict[str, object]:
    if not settings.PORTAL_DEMO:
        return {"accounts": []}
    accounts = []
    for username, _full_name, global_role, memberships in PERSONAS:
        if global_role:
            persona = str(global_role.label)
        else:
            persona = ", ".join(
                _("%(role)s in %(tenant)s") % {"role": role.label, "tenant": slug}
                for slug, role in memberships
            )
        accounts.append({"username": username, "persona": persona})
    return {"accounts": accounts, "password": DEMO_PASSWORD}
