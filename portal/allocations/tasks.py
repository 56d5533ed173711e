from celery import shared_task

from portal.allocations.services import allocations_expire


@shared_task(acks_late=True, autoretry_for=(ConnectionError,), max_retries=5, retry_backoff=True)
def expire_allocations() -> int:
    """Periodic: end allocations past their end time and give their quota back."""
    return allocations_expire()
