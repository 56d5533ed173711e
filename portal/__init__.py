"""The GPU portal: a multi-tenant self-service portal that shares GPUs on Kubernetes."""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
