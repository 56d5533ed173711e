"""The rows of the admin's *Tenants* page, written in Python (see `portal.core.cells`); a
test compares them with the template loop they replaced."""

from collections.abc import Callable, Sequence

from django.utils.translation import gettext as _

from portal.catalog.gpu_eq import gpu_eq_display
from portal.core.cells import text, url_of_each
from tenants.models import Tenant
from tenants.selectors import QuotaLine


def quota_chips() -> Callable[[Sequence[QuotaLine]], str]:
    """A writer of each GPU model's quota left, exact in its title
    (`tenants/_quota_cells.html`), with its words translated once."""
    title = _("%(model)s: %(remaining)s of %(quota)s GPU-eq left (exact)")
    none = f'<span class="empty">{text(_("no GPU quota"))}</span>'

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
