"""The webhook gateway: POSTs one signed event to PORTAL_WEBHOOK_URL.

`X-Portal-Signature: sha256=<hex>` is the HMAC-SHA256, with PORTAL_WEBHOOK_SECRET, of
`<X-Portal-Timestamp>.<body>`. Network errors and 5xx answers raise WebhookFailed, which the
delivery task retries with backoff.
"""

import hashlib
import hmac
import json
import time
from typing import Any

import requests
from django.conf import settings

from portal.allocations.errors import WebhookFailed


def webhook_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={digest.hexdigest()}"


def webhook_request(event_payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The signed body and headers of one webhook delivery."""
    body = json.dumps(event_payload, sort_keys=True).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Portal-Event": str(event_payload["event"]),
        "X-Portal-Timestamp": timestamp,
        "X-Portal-Signature": webhook_signature(
            secret=settings.PORTAL_WEBHOOK_SECRET or "", timestamp=timestamp, body=body
        ),
    }
    return body, headers


def webhook_post(event_payload: dict[str, Any]) -> int:
    """POST one signed event to PORTAL_WEBHOOK_URL and return the receiver's status (0 when the
    webhook was switched off since). Raises WebhookFailed on network errors and 5xx."""
    url = settings.PORTAL_WEBHOOK_URL
    if not url:
        return 0
    body, headers = webhook_request(event_payload)
    try:
        response = requests.post(url, data=body, headers=headers, timeout=10)
    except (requests.ConnectionError, requests.Timeout) as error:
        raise WebhookFailed(f"webhook unreachable: {error}") from error
    if response.status_code >= 500:
        raise WebhookFailed(f"webhook answered {response.status_code}")
    return response.status_code
