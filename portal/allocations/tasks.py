from celery import shared_task

from portal.allocations.errors import WebhookFailed
from portal.allocations.notifications import notification_send, webhook_deliver
from portal.allocations.services import allocations_expire, allocations_notify_expiring


@shared_task(autoretry_for=(ConnectionError,))
def expire_allocations() -> int:
    """Periodic: end allocations past their end time and give their quota back."""
    return allocations_expire()


@shared_task(autoretry_for=(ConnectionError,))
def notify_expiring_allocations() -> int:
    """Periodic: tell owners their allocation ends soon (once per allocation and end time)."""
    return allocations_notify_expiring()


@shared_task(autoretry_for=(OSError,))
def send_request_notification(request_id: int, event: str, extension_id: int | None = None) -> None:
    """Email the event and, when a webhook is configured, queue its delivery."""
    event_payload = notification_send(request_id=request_id, event=event, extension_id=extension_id)
    if event_payload is not None:
        deliver_webhook.delay(event_payload)


@shared_task(autoretry_for=(WebhookFailed,), max_retries=8, retry_backoff=2)
def deliver_webhook(event_payload: dict[str, object]) -> int:
    """POST one signed event; 5xx answers and network errors are retried with backoff."""
    return webhook_deliver(event_payload)
