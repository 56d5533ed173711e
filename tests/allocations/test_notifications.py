"""Notifications go out after commit: email through Django's mail, and a signed webhook
delivered by a real Celery worker to a real HTTP server that fails first, then accepts."""

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from portal.accounts.models import MemberRole
from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest
from portal.allocations.services import (
    allocations_expire,
    allocations_notify_expiring,
    gpu_request_approve,
    gpu_request_submit,
)
from tenants.services import membership_set
from tests.conftest import PASSWORD, wait_until


def test_a_pending_request_emails_the_leads(
    tasks_in_process, django_capture_on_commit_callbacks, developer, lead, a100_tenant, catalog
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
        )

    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["lead@example.org"]
    assert "waits for a lead" in mail.outbox[0].subject


def test_a_decision_emails_the_requester(
    tasks_in_process, django_capture_on_commit_callbacks, developer, lead, a100_tenant, catalog
) -> None:
    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
    )

    with django_capture_on_commit_callbacks(execute=True):
        gpu_request_approve(actor=lead, gpu_request=pending, comment="enjoy")

    assert mail.outbox[-1].to == ["dev@example.org"]
    assert f"Request {pending.pk} is approved" in mail.outbox[-1].subject


def test_owners_hear_once_before_the_end_and_when_it_ends(
    tasks_in_process, django_capture_on_commit_callbacks, developer, a100_tenant, catalog
) -> None:
    allocation = gpu_request_submit(
        actor=developer,
        tenant=a100_tenant,
        offering=catalog["a100-80gb-whole"],
        count=1,
        duration_hours=1,
    )
    soon = timezone.now() + timedelta(minutes=30)

    with django_capture_on_commit_callbacks(execute=True):
        first = allocations_notify_expiring(now=soon)
        second = allocations_notify_expiring(now=soon)
        allocations_expire(now=soon + timedelta(hours=1))

    assert (first, second) == (1, 0)
    subjects = [message.subject for message in mail.outbox]
    assert any(f"Allocation {allocation.pk} ends at" in subject for subject in subjects)
    assert any(f"Allocation {allocation.pk} has ended" in subject for subject in subjects)


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that answers 503 to the first delivery and 200 afterwards."""

    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(503 if len(self.received) == 1 else 200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver():
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()


def test_a_real_worker_delivers_a_signed_webhook_and_retries_a_failure(
    celery_worker, settings, receiver, developer, a100_tenant, catalog
) -> None:
    settings.PORTAL_WEBHOOK_URL = receiver
    settings.PORTAL_WEBHOOK_SECRET = "shared-secret"

    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
    )

    wait_until(lambda: len(Receiver.received) >= 2, timeout=30, what="the webhook to be retried")
    headers, body = Receiver.received[-1]
    expected = hmac.new(
        b"shared-secret", f"{headers['X-Portal-Timestamp']}.".encode() + body, hashlib.sha256
    ).hexdigest()
    assert headers["X-Portal-Signature"] == f"sha256={expected}"
    assert headers["X-Portal-Event"] == "request.pending"
    event = json.loads(body)
    assert event["request"]["id"] == pending.pk
    assert event["request"]["gpu_eq"] == "2"
    assert GpuRequest.objects.get(pk=pending.pk).state == "pending"


def test_each_lead_is_told_in_the_language_saved_on_their_profile(
    tasks_in_process,
    django_capture_on_commit_callbacks,
    developer,
    lead,
    a100_tenant,
    catalog,
) -> None:
    second_lead = user_create(
        actor=None, username="lead-zh", email="lead-zh@example.org", password=PASSWORD
    )
    second_lead.language = "zh-hans"
    second_lead.save(update_fields=["language"])
    membership_set(actor=None, tenant=a100_tenant, user=second_lead, role=MemberRole.LEAD)

    with django_capture_on_commit_callbacks(execute=True):
        gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
        )

    by_recipient = {message.to[0]: message for message in mail.outbox}
    assert sorted(by_recipient) == ["lead-zh@example.org", "lead@example.org"]
    assert "waits for a lead" in by_recipient["lead@example.org"].subject
    chinese = by_recipient["lead-zh@example.org"]
    assert "waits for a lead" not in chinese.subject
    assert "负责人" in chinese.subject, chinese.subject
