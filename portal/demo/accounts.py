"""The demo's accounts: created by `manage.py demo_data`, listed on the demo's sign-in page."""

from portal.accounts.models import GlobalRole, MemberRole

DEMO_PASSWORD = "gpu-portal-demo"  # noqa: S105  (printed on the console and the sign-in page; demo only)

# username, full name, global role, (tenant, role) memberships
PERSONAS: list[tuple[str, str, GlobalRole, list[tuple[str, MemberRole]]]] = [
    ("developer", "Dana Developer", GlobalRole.NONE, [("vision", MemberRole.DEVELOPER)]),
    ("lead", "Lee Lead", GlobalRole.NONE, [("vision", MemberRole.LEAD), ("nlp", MemberRole.LEAD)]),
    ("finance", "Fin Ance", GlobalRole.FINANCE, []),
    ("admin", "Ada Admin", GlobalRole.ADMIN, []),
    ("nlp-dev", "Nia Developer", GlobalRole.NONE, [("nlp", MemberRole.DEVELOPER)]),
]
