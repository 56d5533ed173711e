"""Who hears about a request's life, and what they are told: email and an optional webhook.

Services call `notify_on_commit`; the email and the webhook leave from tasks after the
transaction commits, so a rolled-back change tells nobody and a slow mail server or webhook
never holds a request up. Webhook bodies are signed: `X-Portal-Signature: sha256=<hex>` is the
HMAC-SHA256, with PORTAL_WEBHOOK_SECRET, of `<X-Portal-Timestamp>.<body>` (see `webhook`).

An extension's events (`extension.pending`, `extension.decided`) name the extension too: its
hours, reason and decision are in the email and in the payload's `extension`.
"""

from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from portal.accounts.models import MemberRole
from portal.accounts.selectors import emails_by_language
from portal.allocations.models import GpuRequest, GpuRequestExtension
from portal.allocations.webhook import webhook_post
from portal.catalog.gpu_eq import gpu_eq_display
from tenants.models import Membership

EVENTS: dict[str, Promise] = {
    "request.pending": gettext_lazy("Request %(id)s waits for a lead: %(what)s in %(tenant)s"),
    "request.decided": gettext_lazy("Request %(id)s is %(state)s: %(what)s in %(tenant)s"),
    "allocation.expiring": gettext_lazy(
        "Allocation %(id)s ends at %(ends_at)s: %(what)s in %(tenant)s"
    ),
    "allocation.expired": gettext_lazy("Allocation %(id)s has ended: %(what)s in %(tenant)s"),
    "allocation.revoked": gettext_lazy("Allocation %(id)s was revoked: %(what)s in %(tenant)s"),
    "allocation.idle": gettext_lazy(
        "Allocation %(id)s sits idle: %(what)s in %(tenant)s; release it when done"
    ),
    "extension.pending": gettext_lazy(
        "Extending allocation %(id)s by %(hours)s h waits for a lead: %(what)s in %(tenant)s"
    ),
    "extension.decided": gettext_lazy(
        "Extending allocation %(id)s by %(hours)s h is %(extension_state)s: %(what)s in %(tenant)s"
    ),
}
# Told to the tenant's leads (but not to whoever asked); everything else goes to the requester.
FOR_LEADS = frozenset({"request.pending", "extension.pending"})


def notify_on_commit(
    gpu_request: GpuRequest, event: str, *, extension: GpuRequestExtension | None = None
) -> None:
    """Send `event` about `gpu_request` (and its `extension`) once the transaction commits."""
    from portal.allocations.tasks import send_request_notification  # noqa: PLC0415  (cycle)

    send_request_notification.delay(gpu_request.pk, event, extension.pk if extension else None)


def recipients(
    gpu_request: GpuRequest, event: str, extension: GpuRequestExtension | None = None
) -> list[str]:
    """The tenant's leads for what waits for a lead; the requester for everything else."""
    asker = extension.requested_by if extension is not None else gpu_request.requester
    if event in FOR_LEADS:
        leads = Membership.objects.filter(tenant=gpu_request.tenant, role=MemberRole.LEAD)
        emails = leads.exclude(user__in=[gpu_request.requester, asker]).values_list(
            "user__email", flat=True
        )
        return sorted(email for email in emails if email)
    return [asker.email] if asker.email else []


def payload(
    gpu_request: GpuRequest, event: str, extension: GpuRequestExtension | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "event": event,
        "request": {
            "id": gpu_request.pk,
            "tenant": gpu_request.tenant.slug,
            "requester": gpu_request.requester.username,
            "offering": gpu_request.offering.slug,
            "count": gpu_request.count,
            "gpu_eq": str(gpu_request.gpu_eq),
            "state": gpu_request.state,
            "ends_at": gpu_request.ends_at.isoformat() if gpu_request.ends_at else None,
            "decision_comment": gpu_request.decision_comment,
        },
    }
    if extension is not None:
        body["extension"] = {
            "id": extension.pk,
            "hours": extension.hours,
            "reason": extension.reason,
            "requested_by": extension.requested_by.username,
            "state": extension.state,
            "decision_comment": extension.decision_comment,
        }
    return body


def subject(
    gpu_request: GpuRequest, event: str, extension: GpuRequestExtension | None = None
) -> str:
    return str(EVENTS[event]) % {
        "id": gpu_request.pk,
        "state": gpu_request.get_state_display(),
        "tenant": gpu_request.tenant.slug,
        "what": f"{gpu_request.count} x {gpu_request.offering.name} "
        f"({gpu_eq_display(gpu_request.gpu_eq)} GPU-eq)",
        "ends_at": f"{gpu_request.ends_at:%Y-%m-%d %H:%M} UTC" if gpu_request.ends_at else "",
        "hours": extension.hours if extension else "",
        "extension_state": extension.get_state_display() if extension else "",
    }


def _body(gpu_request: GpuRequest, event: str, extension: GpuRequestExtension | None) -> str:
    if extension is None:
        # The portal's own comments are kept in English: in the reader's language here (a
        # lead's comment is not in the catalog and stays as written).
        return _(gpu_request.decision_comment) if gpu_request.decision_comment else ""
    lines = [_("Reason: %(reason)s") % {"reason": extension.reason}]
    if extension.decision_comment:
        lines.append(_("Comment: %(comment)s") % {"comment": extension.decision_comment})
    return "\n".join(lines)


def email_send(
    gpu_request: GpuRequest, event: str, extension: GpuRequestExtension | None = None
) -> int:
    """Email the event to its recipients. Returns how many messages went out."""
    to = recipients(gpu_request, event, extension)
    if not to:
        return 0
    page = "/approvals/" if event in FOR_LEADS else "/requests/"
    link = f"{settings.PORTAL_BASE_URL}{page}"
    sent = 0
    for language, addresses in emails_by_language(to).items():
        with translation.override(language):
            title = subject(gpu_request, event, extension)
            body = f"{title}.\n\n{_body(gpu_request, event, extension)}\n\n{link}\n".strip()
            sent += send_mail(title, body, None, addresses)
    return sent


def notification_send(
    *, request_id: int, event: str, extension_id: int | None = None
) -> dict[str, Any] | None:
    """Email `event` about a request (and its extension); the webhook payload to deliver when
    a webhook is set.

    None when the request (or the extension) is gone or no webhook is configured.
    """
    gpu_request = (
        GpuRequest.objects.select_related("tenant", "requester", "offering")
        .filter(pk=request_id)
        .first()
    )
    if gpu_request is None:
        return None
    extension = None
    if extension_id is not None:
        extension = (
            GpuRequestExtension.objects.select_related("requested_by")
            .filter(pk=extension_id, request=gpu_request)
            .first()
        )
        if extension is None:
            return None
    email_send(gpu_request, event, extension)
    return payload(gpu_request, event, extension) if settings.PORTAL_WEBHOOK_URL else None


def webhook_deliver(event_payload: dict[str, Any]) -> int:
    """Deliver one event through the webhook gateway: the receiver's status. Raises
    WebhookFailed when it is worth trying again."""
    return webhook_post(event_payload)
