"""The audit trail: one function every service calls inside its transaction.

Where the change came from (request id, source IP, user agent) is taken from the current
request, which the middleware records in a context variable; tasks have none.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.http import HttpRequest

from portal.core.models import AuditEvent

if TYPE_CHECKING:
    from portal.accounts.models import User
    from tenants.models import Tenant


@dataclass(frozen=True)
class RequestOrigin:
    request_id: str
    source_ip: str | None
    user_agent: str


_origin: ContextVar[RequestOrigin | None] = ContextVar("audit_origin", default=None)


def origin_of(request: HttpRequest, request_id: str) -> RequestOrigin:
    return RequestOrigin(
        request_id=request_id,
        source_ip=request.META.get("REMOTE_ADDR") or None,
        user_agent=request.headers.get("User-Agent", "")[:300],
    )


@contextmanager
def request_origin(origin: RequestOrigin) -> Iterator[None]:
    """Attribute audit events recorded inside the block to `origin`."""
    token = _origin.set(origin)
    try:
        yield
    finally:
        _origin.reset(token)


def _plain(value: Any) -> Any:
    """A JSON-safe form of a field value for the before/after record."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, models.Model):
        return str(value)
    return str(value)


def changes_between(
    before: dict[str, Any], after: dict[str, Any], fields: Iterable[str] | None = None
) -> dict[str, list[Any]]:
    """`{field: [before, after]}` for the fields whose value differs."""
    names = fields if fields is not None else sorted(set(before) | set(after))
    return {
        name: [_plain(before.get(name)), _plain(after.get(name))]
        for name in names
        if before.get(name) != after.get(name)
    }


def snapshot(instance: models.Model, fields: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in fields}


def audit_record(
    *,
    actor: "User | None",
    action: str,
    target: models.Model,
    tenant: "Tenant | None" = None,
    changes: dict[str, list[Any]] | None = None,
    comment: str = "",
) -> AuditEvent:
    """Append one audit event. Must run inside the service's transaction.

    `action` is `<noun>.<verb>` (e.g. `tenant.suspend`); `changes` maps each changed field to
    `[before, after]`; `actor` is None for the system (tasks, reconcile).
    """
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must be called inside the service's transaction")
    origin = _origin.get()
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=actor.username if actor is not None else "",
        action=action,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        target_name=str(target)[:200],
        tenant=tenant,
        changes=changes or {},
        comment=comment,
        request_id=origin.request_id if origin else "",
        source_ip=origin.source_ip if origin else None,
        user_agent=origin.user_agent if origin else "",
    )
