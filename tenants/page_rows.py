"""The rows of the admin's *Tenants* page and of a tenant's members, written in Python (see
`portal.core.cells`); tests compare them with the template loops they replaced."""

from collections.abc import Callable, Sequence
from urllib.parse import quote

from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.translation import gettext as _

from portal.accounts.models import MemberRole
from portal.catalog.gpu_eq import gpu_eq_display
from portal.core.cells import text, url_of_each
from tenants.models import Membership, Tenant
from tenants.selectors import QuotaLine


def quota_chips() -> Callable[[Sequence[QuotaLine]], str]:
    """A writer of each GPU model's quota left, exact in its title
    (`tenants/_quota_cells.html`), with its words translated once."""
    title = _("%(model)s: %(remaining)s of %(quota)s GPU-eq left (exact)")
    no_quota = _("no GPU quota")  # outside the f-string: xgettext reads no call inside one
    none = f'<span class="empty">{text(no_quota)}</span>'

    def chips(lines: Sequence[QuotaLine]) -> str:
        if not lines:
            return none
        written = []
        for line in lines:
            name, remaining = text(line.gpu_model.name), line.remaining
            exact = title % {"model": name, "remaining": text(remaining), "quota": text(line.quota)}
            written.append(
                f'<span class="quota-chip{" full" if remaining <= 0 else ""}" title="{exact}">'
                f"{name}: {text(gpu_eq_display(remaining))} / {text(gpu_eq_display(line.quota))}"
                "</span>"
            )
        return "".join(written)

    return chips


def tenants_row() -> Callable[[tuple[Tenant, Sequence[QuotaLine]]], str]:
    """*Tenants*' row writer, for (tenant with `member_count`, its quota lines)."""
    detail = url_of_each("tenants:detail")
    chips = quota_chips()

    def row(listed: tuple[Tenant, Sequence[QuotaLine]]) -> str:
        tenant, lines = listed
        slug = text(tenant.slug)
        return (
            f'<tr><td><a href="{detail(tenant.slug)}">{text(tenant.name)}</a> '
            f"<small>{slug}</small></td>"
            f"<td>{text(tenant.cost_centre or '—')}</td>"
            f'<td><span class="state {text(tenant.state)}">{text(tenant.state_label)}</span></td>'
            f"<td>{text(tenant.member_count)}</td>"  # type: ignore[attr-defined]
            f"<td>{chips(lines)}</td></tr>"
        )

    return row


# Stands for a username while the URL of a member's removal is reversed once.
_USERNAME_MARK = "username-mark"


def member_row(slug: str, *, csrf_token: str | None) -> Callable[[Membership], str]:
    """The writer of a member's row on the tenant page (with its user), with the form that
    removes them when given the page's `csrf_token` (the viewer leads the tenant and members
    are not the identity provider's)."""
    roles = {role.value: text(role.label) for role in MemberRole}
    remove = text(_("Remove"))
    head, _mark, tail = reverse("tenants:member-remove", args=[slug, _USERNAME_MARK]).partition(
        _USERNAME_MARK
    )
    token = text(csrf_token or "")

    def row(membership: Membership) -> str:
        user = membership.user
        username = text(user.username)
        written = (
            f'<tr data-testid="member-{username}">'
            f"<td>{text(user.get_full_name() or user.username)}</td><td>{username}</td>"
            f"<td>{roles.get(membership.role) or text(membership.role)}</td>"
        )
        if csrf_token is not None:
            # As reverse() quotes a username in the URL.
            url = text(f"{head}{quote(user.username, safe=RFC3986_SUBDELIMS + '/~:@')}{tail}")
            written += (
                f'<td><form method="post" action="{url}" class="inline" hx-post="{url}"'
                ' hx-target="body" hx-swap="beforeend">'
                f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
                f'<button type="submit" class="link">{remove}</button></form></td>'
            )
        return written + "</tr>"

    return row
