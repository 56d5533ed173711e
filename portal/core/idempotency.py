"""`Idempotency-Key` on API POSTs: the same key and body within 24 hours answers the first
result again and never repeats the write.

The key is stored in the same transaction as the write it guards, so a failed call leaves no
key behind (a retry really retries), and a concurrent duplicate waits on the key's unique index
until the first commits, then replays its answer.
"""

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import Conflict, ValidationFailed
from portal.core.models import IdempotencyKey
from portal.core.validators import control_characters_problem

KEY_HEADER = "Idempotency-Key"
KEY_LIFETIME = timedelta(hours=24)


def _body_hash(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotent(request: Request, endpoint: str, write: Callable[[], Response]) -> Response:
    """Run `write` once per (user, Idempotency-Key); replay its response to retries."""
    key = request.headers.get(KEY_HEADER, "").strip()
    if not key:
        return write()
    if len(key) > 255:
        raise ValidationFailed(
            _("%(header)s is too long.") % {"header": KEY_HEADER},
            fields={KEY_HEADER: [_("At most 255 characters.")]},
        )
    if control_characters_problem(key):
        raise ValidationFailed(
            _("%(header)s holds control characters.") % {"header": KEY_HEADER},
            fields={KEY_HEADER: [_("Control characters are not allowed here.")]},
        )
    body = request.data
    if not isinstance(body, Mapping):
        # A list, a number, a string or null cannot be the write's fields; say so, don't hash it.
        raise ValidationFailed.on(
            "body", _("With %(header)s the body must be a JSON object.") % {"header": KEY_HEADER}
        )
    body_hash = _body_hash(dict(body))
    with transaction.atomic():
        record, created = IdempotencyKey.objects.select_for_update().get_or_create(
            user=request.user,  # type: ignore[misc]
            key=key,
            defaults={"endpoint": endpoint, "body_hash": body_hash},
        )
        if not created and record.created_at < timezone.now() - KEY_LIFETIME:
            record.delete()  # expired: the key starts afresh
            record = IdempotencyKey.objects.create(
                user=request.user,
                key=key,
                endpoint=endpoint,
                body_hash=body_hash,  # type: ignore[misc]
            )
            created = True
        if not created:
            if record.endpoint != endpoint or record.body_hash != body_hash:
                raise Conflict(
                    _("This %(header)s was used for another request; use a new key.")
                    % {"header": KEY_HEADER},
                    fields={KEY_HEADER: [_("Used with another body or endpoint.")]},
                )
            replay = Response(record.response, status=record.status_code)
            replay["Idempotent-Replayed"] = "true"
            return replay
        response = write()
        record.status_code = response.status_code
        record.response = response.data
        record.save(update_fields=["status_code", "response"])
    return response


IDEMPOTENCY_HEADER = OpenApiParameter(
    KEY_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="Retries with the same key and body within 24 hours get the first answer.",
)


def idempotent_post[V: APIView](
    method: Callable[..., Response],
) -> Callable[..., Response]:
    """Make an API view's `post` honour `Idempotency-Key`, keyed by the request's path."""

    @functools.wraps(method)
    def post(view: V, request: Request, *args: Any, **kwargs: Any) -> Response:
        return idempotent(request, request.path, lambda: method(view, request, *args, **kwargs))

    return extend_schema(parameters=[IDEMPOTENCY_HEADER])(post)
