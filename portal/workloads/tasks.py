"""Retry policies around the notebook services: reading pods, culling, notices."""

from typing import Any

from celery import shared_task

from portal.cluster.errors import ClusterError
from portal.workloads import culling, services


@shared_task(ignore_result=True)
def observe_notebooks() -> dict[str, int | str]:
    """Every PORTAL_NOTEBOOK_OBSERVE_SECONDS: read every cluster's notebook pods."""
    return services.notebooks_observe_all()


@shared_task(bind=True, ignore_result=True, max_retries=3, throws=(ClusterError,))
def observe_notebook(self: Any, notebook_id: int) -> int:
    """Read one notebook's pod now (a page is watching it)."""
    try:
        return services.notebook_observe(notebook_id=notebook_id)
    except ClusterError as error:
        if error.transient:
            raise self.retry(exc=error, countdown=2 ** (self.request.retries + 1)) from error
        raise


@shared_task(ignore_result=True)
def cull_idle_notebooks() -> dict[str, int] | str:
    """Every PORTAL_CULL_SECONDS: warn about, then stop, idle notebooks."""
    return culling.cull_safely()


@shared_task(bind=True, ignore_result=True)
def send_cull_notice(self: Any, notebook_id: int) -> int:
    try:
        return services.cull_notice_send(notebook_id=notebook_id)
    except OSError as error:  # the mail server; try again later
        raise self.retry(exc=error, countdown=60 * (self.request.retries + 1)) from error
