"""The rows of *My requests*, *All requests* and *Approvals*, written in Python (see
`portal.core.cells`).

Each writer is made for one page (`for_page`): what is the same on every row (the CSRF input,
the URLs reversed once, the words in the caller's language) is made once, then each row is
an f-string of escaped values. A test compares each with the template loop it replaced.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.urls import reverse
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, GpuRequestExtension, RequestState
from portal.allocations.selectors import QuotaLeft
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import GpuModel
from portal.core.cells import csrf_input, iso, since, text, until, url_of_each, when

_HOLDING = (RequestState.APPROVED, RequestState.ACTIVE)


def state_html(gpu_request: GpuRequest, see_the_run: str) -> str:
    """The request's state and, while it waits, why (`allocations/_state.html`)."""
    pk = text(gpu_request.pk)
    shown = (
        f'<span class="state {text(gpu_request.state)}" data-testid="request-state-{pk}">'
        f"{text(gpu_request.state_label)}</span>"
    )
    waiting = getattr(gpu_request, "waiting", None)
    if waiting:
        code = text(waiting.code)
        link = (
            f' <a href="{text(waiting.link)}" data-testid="waiting-link-{pk}">{see_the_run}</a>'
            if waiting.link
            else ""
        )
        shown += (
            f'<br><small class="waiting {code}" data-testid="waiting-{pk}" '
            f'data-waiting="{code}">{text(waiting.message)}{link}</small>'
        )
    return shown


def _asked(gpu_request: GpuRequest, detail: Callable[[int], str]) -> str:
    """The GPUs asked for, linked to the request, and their GPU-eq."""
    return (
        f'<td><a href="{detail(gpu_request.pk)}">{text(gpu_request.count)} × '  # noqa: RUF001
        f"{text(gpu_request.offering.name)}</a></td>"
        f'<td title="{text(gpu_request.gpu_eq)}">{text(gpu_eq_display(gpu_request.gpu_eq))}</td>'
    )


@dataclass(frozen=True)
class _Page:
    csrf: str
    detail: Callable[[int], str]
    see_the_run: str


def _page(request: HttpRequest) -> _Page:
    return _Page(csrf_input(request), url_of_each("allocations:detail"), text(_("See the run")))


def all_requests_row(request: HttpRequest, *, revokes: bool) -> Callable[[GpuRequest], str]:
    """*All requests*' row writer; `revokes`: the caller may revoke (a column more)."""
    page = _page(request)
    revoke = url_of_each("allocations:transition", "revoke")
    back = text(reverse("allocations:all"))
    reason, revoke_label = text(_("reason")), text(_("Revoke"))

    def row(gpu_request: GpuRequest) -> str:
        pk = text(gpu_request.pk)
        ends = when(gpu_request.ends_at) or "—"
        written = (
            f"<tr><td>{pk}</td><td>{when(gpu_request.created_at)}</td>"
            f"<td>{text(gpu_request.tenant.slug)}</td>"
            f"<td>{text(gpu_request.requester.username)}</td>"
            f"{_asked(gpu_request, page.detail)}"
            f"<td>{state_html(gpu_request, page.see_the_run)}</td><td>{ends}</td>"
        )
        if revokes:
            form = ""
            if gpu_request.state in _HOLDING:
                url = revoke(gpu_request.pk)
                label = text(_("Reason to revoke %(pk)s") % {"pk": pk})
                form = (
                    f'<form method="post" action="{url}" class="inline" hx-post="{url}" '
                    f'hx-target="body" hx-swap="beforeend">{page.csrf}'
                    f'<input type="hidden" name="next" value="{back}">'
                    f'<input name="comment" required placeholder="{reason}" aria-label="{label}">'
                    f'<button type="submit" class="danger">{revoke_label}</button></form>'
                )
            written += f"<td>{form}</td>"
        return written + "</tr>"

    return row


def my_requests_row(request: HttpRequest) -> Callable[[GpuRequest], str]:
    """*My requests*' row writer: the rows carry `.waiting`, `.cost` and
    `.pending_extension`."""
    page = _page(request)
    cancel = url_of_each("allocations:transition", "cancel")
    release = url_of_each("allocations:transition", "release")
    extend = url_of_each("allocations:extend")
    cancel_extension = url_of_each("allocations:extension-decide", "cancel")
    launch = text(reverse("workloads:new"))
    words = {
        "cancel": text(_("Cancel")),
        "launch": text(_("Launch a notebook")),
        "release": text(_("Release")),
        "hours": text(_("Hours to extend")),
        "extend": text(_("Extend")),
        "cancel extension": text(_("Cancel extension")),
    }

    def extension(gpu_request: GpuRequest, pk: str) -> str:
        """Its extension waiting for a lead, or the form to ask for one
        (`allocations/_extension_cell.html`)."""
        waiting = getattr(gpu_request, "pending_extension", None)
        if waiting:
            hours = _("Extension by %(hours)s h waiting for a lead") % {
                "hours": text(waiting.hours)
            }
            label = _("Cancel extension of request %(id)s") % {"id": pk}
            return (
                f'\n<br><span class="state pending" data-testid="extension-waiting-{pk}">'
                f"{hours}</span>\n"
                f'<form method="post" action="{cancel_extension(waiting.pk)}" class="inline">'
                f'{page.csrf}<button type="submit" aria-label="{label}">'
                f"{words['cancel extension']}</button></form>\n"
            )
        return (
            f'\n<form method="post" action="{extend(gpu_request.pk)}" class="inline">'
            f'{page.csrf}<input type="number" name="hours" min="1" value="1" '
            f'aria-label="{words["hours"]}" class="narrow-input">'
            f'<button type="submit">{words["extend"]}</button></form>\n'
        )

    def row(gpu_request: GpuRequest) -> str:
        pk = text(gpu_request.pk)
        state = state_html(gpu_request, page.see_the_run)
        if gpu_request.decision_comment:
            state += f"<br><small>{text(_(gpu_request.decision_comment))}</small>"
        holding = gpu_request.state in _HOLDING
        left = until(gpu_request.ends_at) if holding else "—"
        cost = getattr(gpu_request, "cost", None)
        actions = ""
        if gpu_request.state == RequestState.PENDING:
            actions = (
                f'<form method="post" action="{cancel(gpu_request.pk)}" class="inline">'
                f'{page.csrf}<button type="submit">{words["cancel"]}</button></form>'
            )
        elif holding:
            url = release(gpu_request.pk)
            actions = (
                f'<a href="{launch}?allocation={pk}">{words["launch"]}</a>\n'
                f'<form method="post" action="{url}" class="inline" hx-post="{url}" '
                f'hx-target="body" hx-swap="beforeend">{page.csrf}'
                f'<button type="submit">{words["release"]}</button></form>\n'
                f"{extension(gpu_request, pk)}"
            )
        return (
            f"<tr><td>{pk}</td><td>{text(gpu_request.tenant.slug)}</td>"
            f"{_asked(gpu_request, page.detail)}<td>{state}</td>"
            f'<td data-testid="time-left-{pk}" data-ends-at="{iso(gpu_request.ends_at)}">'
            f"{left}</td>"
            f'<td data-testid="cost-{pk}">{text(cost) if cost else "—"}</td>'
            f"<td>{actions}</td></tr>"
        )

    return row


def _quota_left(left: QuotaLeft | None, model: GpuModel) -> str:
    """The quota left for the row's model, or that there is none."""
    if not left:
        return _("no quota for %(model)s") % {"model": text(model.name)}
    remaining, quota = left.remaining, left.quota
    shown = _("%(remaining)s of %(quota)s GPU-eq (%(model)s)") % {
        "remaining": text(gpu_eq_display(remaining)),
        "quota": text(gpu_eq_display(quota)),
        "model": text(model.name),
    }
    return f'<span title="{text(remaining)} / {text(quota)}">{shown}</span>'


class _Decisions:
    """What a row of the *Approvals* page's tables writes in its last cell: the form that
    approves or rejects it with a comment, or that it is the caller's own. What is the same on
    every row is made once; `route` decides the row's approve and reject actions."""

    def __init__(self, request: HttpRequest, route: str) -> None:
        self.approve_url = url_of_each(route, "approve")
        self.reject_url = url_of_each(route, "reject")
        self.csrf = csrf_input(request)
        self.back = text(reverse("allocations:approvals"))
        self.comment = text(_("comment"))
        self.approve = text(_("Approve"))
        self.reject = text(_("Reject"))
        # Out of the f-string: xgettext reads no call inside one.
        own = _("your own: another lead or an admin decides")
        self.own = f"<small>{text(own)}</small>"

    def cell(self, pk: int, *, own: bool, label: str, test_id: str = "") -> str:
        """The decision of row `pk` (`label` names its comment field; `test_id`, if given,
        the buttons' `data-testid`s: approve-<test_id>, reject-<test_id>)."""
        if own:
            return self.own
        on_approve = f' data-testid="approve-{test_id}"' if test_id else ""
        on_reject = f' data-testid="reject-{test_id}"' if test_id else ""
        return (
            f'<form method="post" action="{self.approve_url(pk)}" class="inline">'
            f'{self.csrf}<input type="hidden" name="next" value="{self.back}">'
            f'<input type="text" name="comment" placeholder="{self.comment}" '
            f'aria-label="{label}"><button type="submit"{on_approve}>{self.approve}</button>'
            f'<button type="submit" formaction="{self.reject_url(pk)}"{on_reject}>'
            f"{self.reject}</button></form>"
        )


def approvals_row(request: HttpRequest, user: User) -> Callable[[GpuRequest], str]:
    """The writer of a request's row in `user`'s queue; the rows carry `.quota_left`."""
    decisions = _Decisions(request, "allocations:transition")

    def row(gpu_request: GpuRequest) -> str:
        pk = text(gpu_request.pk)
        select = _("Select request %(id)s") % {"id": pk}
        decide = decisions.cell(
            gpu_request.pk,
            own=gpu_request.requester_id == user.pk and not user.is_portal_admin,
            label=_("Comment on request %(id)s") % {"id": pk},
        )
        asked = _("%(since)s ago") % {"since": since(gpu_request.created_at)}
        left = _quota_left(getattr(gpu_request, "quota_left", None), gpu_request.gpu_model)
        return (
            f'<tr data-testid="pending-{pk}"><td><input type="checkbox" name="ids" '
            f'value="{pk}" form="approve-selected" aria-label="{select}"></td>'
            f"<td>{asked}</td><td>{text(gpu_request.tenant.slug)}</td>"
            f"<td>{text(gpu_request.requester.username)}</td>"
            f"<td>{text(gpu_request.count)} × {text(gpu_request.offering.name)}</td>"  # noqa: RUF001
            f'<td title="{text(gpu_request.gpu_eq)}">{text(gpu_eq_display(gpu_request.gpu_eq))}'
            f"</td><td>{text(gpu_request.duration_hours)}</td>"
            f'<td data-testid="quota-left-{pk}">{left}</td>'
            f"<td>{text(gpu_request.justification) if gpu_request.justification else '—'}</td>"
            f"<td>{decide}</td></tr>"
        )

    return row


def extension_approvals_row(
    request: HttpRequest, user: User
) -> Callable[[GpuRequestExtension], str]:
    """The writer of an extension's row in `user`'s queue; the rows carry `.quota_left`."""
    decisions = _Decisions(request, "allocations:extension-decide")

    def row(extension: GpuRequestExtension) -> str:
        allocation = extension.request
        pk = text(extension.pk)
        decide = decisions.cell(
            extension.pk,
            own=not user.is_portal_admin
            and user.pk in (extension.requested_by_id, allocation.requester_id),
            label=_("Comment on extension %(id)s") % {"id": pk},
            test_id=f"extension-{pk}",
        )
        asked = _("%(since)s ago") % {"since": since(extension.created_at)}
        what = _("#%(id)s: %(units)s × %(offering)s") % {  # noqa: RUF001
            "id": text(allocation.pk),
            "units": text(allocation.count),
            "offering": text(allocation.offering.name),
        }
        hours = _("+%(hours)s h (%(total)s of at most %(max)s h)") % {
            "hours": text(extension.hours),
            "total": text(allocation.duration_hours + extension.hours),
            "max": text(allocation.tenant.max_duration_hours),
        }
        left = _quota_left(getattr(extension, "quota_left", None), allocation.gpu_model)
        return (
            f'<tr data-testid="extension-{pk}"><td>{asked}</td>'
            f"<td>{text(allocation.tenant.slug)}</td>"
            f"<td>{text(extension.requested_by.username)}</td>"
            f"<td>{what} ({text(gpu_eq_display(allocation.gpu_eq))} GPU-eq)</td>"
            f"<td>{when(allocation.ends_at) or '—'}</td>"
            f'<td data-testid="extension-hours-{pk}">{hours}</td>'
            f'<td data-testid="extension-quota-left-{pk}">{left}</td>'
            f"<td>{text(extension.reason)}</td><td>{decide}</td></tr>"
        )

    return row
