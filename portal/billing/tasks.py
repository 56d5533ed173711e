"""Celery tasks for chargeback: the periodic budget check and its notifications, and the open
months' provisional totals."""

from celery import shared_task

from portal.billing.services import budget_alert_send, budgets_check, open_months_price
from portal.core.task_base import RobustlySentTask


@shared_task(autoretry_for=(ConnectionError,))
def check_budgets() -> int:
    """Periodic (PORTAL_BUDGET_CHECK_SECONDS): notify each budget's 80% and 100% once a month."""
    return budgets_check()


@shared_task(ignore_result=True)
def price_open_months() -> int:
    """Periodic (PORTAL_METERING_SECONDS): price the open months' statement totals anew where
    usage or prices changed, so that the Chargeback page reads them stored."""
    return open_months_price()


# Robustly sent: a send lost after the commit is picked up by the next check (`notified_at`).
@shared_task(base=RobustlySentTask, autoretry_for=(OSError,))
def send_budget_alert(alert_id: int) -> int:
    """Email one budget alert to the tenant's leads and finance (after the alert committed)."""
    return budget_alert_send(alert_id=alert_id)
