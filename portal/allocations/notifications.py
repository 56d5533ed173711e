"""Who hears about a request's life, and what they are told: email and an optional webhook.

Services call `notify_on_commit`; the email and the webhook leave from tasks after the
transaction commits, so a rolled-back change tells nobody and a slow mail server or webhook
never holds a request up. Webhook bodies are signed: `X-Portal-Signature: sha256=<hex>` is the
HMAC-SHA256, with PORTAL_WEBHOOK_SECRET, of `<X-Portal-Timestamp>.<body>` (see `webhook`).
"""

from typing import Any

from django.conf import settings
from django.core.mail import send_mail

from portal.accounts.models import MemberRole
from portal.allocations.models import GpuRequest
from portal.allocations.webhook import webhook_post
from portal.catalog.gpu_eq import gpu_eq_display
from tenants.models import Membership

EVENTS = {
    "request.pending": "Request {id} waits for a lead: {what} in {tenant}",
    "request.decided": "Request {id} is {state}: {what} in {tenant}",
    "allocation.expiring": "Allocation {id} ends at {ends_at}: {what} in {tenant}",
    "allocation.expired": "Allocation {id} has ended: {what} in {tenant}",
    "allocation.revoked": "Allocation {id} was revoked: {what} in {tenant}",
    "allocation.idle": "Allocation {id} sits idle: {what} in {tenant}; release it when done",
}


def notify_on_commit(gpu_request: GpuRequest, event: str) -> None:
    """Send `event` about `gpu_request` once the current transaction commits."""
    from portal.allocations.tasks import send_request_notification  # noqa: PLC0415  (cycle)

    send_request_notification.delay(gpu_request.pk, event)


def recipients(gpu_request: GpuRequest, event: str) -> list[str]:
    """The tenant's leads for a pending request; the requester for everything else."""
    if event == "request.pending":
        leads = Membership.objects.filter(tenant=gpu_request.tenant, role=MemberRole.LEAD)
        emails = leads.exclude(user=gpu_request.requester).values_list("user__email", flat=True)
        return sorted(email for email in emails if email)
    return [gpu_request.requester.email] if gpu_request.requester.email else []


def payload(gpu_request: GpuRequest, event: str) -> dict[str, Any]:
    return {
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


def subject(gpu_request: GpuRequest, event: str) -> str:
    return EVENTS[event].format(
        id=gpu_request.pk,
        state=gpu_request.state,
        tenant=gpu_request.tenant.slug,
        what=f"{gpu_request.count} x {gpu_request.offering.name} "
        f"({gpu_eq_display(gpu_request.gpu_eq)} GPU-eq)",
        ends_at=f"{gpu_request.ends_at:%Y-%m-%d %H:%M} UTC" if gpu_request.ends_at else "",
    )


def email_send(gpu_request: GpuRequest, event: str) -> int:
    """Email the event to its recipients. Returns how many messages went out."""
    to = recipients(gpu_request, event)
    if not to:
        return 0
    link = f"{settings.PORTAL_BASE_URL}/requests/"
    body = f"{subject(gpu_request, event)}.\n\n{gpu_request.decision_comment}\n\n{link}\n".strip()
    return send_mail(subject(gpu_request, event), body, None, to)


def notification_send(*, request_id: int, event: str) -> dict[str, Any] | None:
    """Email `event` about a request; the webhook payload to deliver when a webhook is set.

    None when the request is gone or no webhook is configured.
    """
    gpu_request = (
        GpuRequest.objects.select_related("tenant", "requester", "offering")
        .filter(pk=request_id)
        .first()
    )
    if gpu_request is None:
        return None
    email_send(gpu_request, event)
    return payload(gpu_request, event) if settings.PORTAL_WEBHOOK_URL else None


def webhook_deliver(event_payload: dict[str, Any]) -> int:
    """Deliver one event through the webhook gateway: the receiver's status. Raises
    WebhookFailed when it is worth trying again."""
    return webhook_post(event_payload)
