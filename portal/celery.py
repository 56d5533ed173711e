"""The Celery application. Settings come from Django's, under the CELERY_ prefix.

Without a broker (`REDIS_URL` and `CELERY_BROKER_URL` unset) tasks run in-process and eagerly,
so the embedded demo runs the same task code with no Redis and no worker.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal", task_cls="portal.core.task_base:PortalTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
