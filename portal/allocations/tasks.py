import requests
from celery import Task, shared_task
from django.conf import settings

from portal.allocations.models import GpuRequest
from portal.allocations.notifications import email_send, payload, webhook_request
from portal.allocations.services import allocations_expire, allocations_notify_expiring


@shared_task(acks_late=True, autoretry_for=(ConnectionError,), max_retries=5, retry_backoff=True)
def expire_allocations() -> int:
    """Periodic: end allocations past their end time and give their quota back."""
    return allocations_expire()


@shared_task(acks_late=True, autoretry_for=(ConnectionError,), max_retries=5, retry_backoff=True)
def notify_expiring_allocations() -> int:
    """Periodic: tell owners their allocation ends soon (once per allocation and end time)."""
    return allocations_notify_expiring()


@shared_task(acks_late=True, autoretry_for=(OSError,), max_retries=5, retry_backoff=True)
def send_request_notification(request_id: int, event: str) -> None:
    """Email the event and, when a webhook is configured, queue its delivery."""
    gpu_request = (
        GpuRequest.objects.select_related("tenant", "requester", "offering")
        .filter(pk=request_id)
        .first()
    )
    if gpu_request is None:
        return
    email_send(gpu_request, event)
    if settings.PORTAL_WEBHOOK_URL:
        deliver_webhook.delay(payload(gpu_request, event))


class WebhookFailed(Exception):
    """The receiver answered with a server error; worth trying again."""


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(requests.ConnectionError, requests.Timeout, WebhookFailed),
    max_retries=8,
    retry_backoff=2,
    retry_backoff_max=600,
)
def deliver_webhook(self: Task, event_payload: dict[str, object]) -> int:  # type: ignore[type-arg]
    """POST one signed event to PORTAL_WEBHOOK_URL; 5xx and network errors are retried."""
    url = settings.PORTAL_WEBHOOK_URL
    if not url:
        return 0  # the webhook was switched off since the event was queued
    body, headers = webhook_request(event_payload)
    response = requests.post(url, data=body, headers=headers, timeout=10)
    if response.status_code >= 500:
        raise WebhookFailed(f"webhook answered {response.status_code}")
    return response.status_code
