"""The audit trail: one function every service calls inside its transaction, and the one
service that removes events, once past their retention and archived to a file.

Where the change came from (request id, source IP, user agent) is taken from the current
request, which the middleware records in a context variable; tasks have none.
"""

import gzip
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest

from portal.core.errors import Conflict
from portal.core.http import client_address
from portal.core.models import AuditArchive, AuditEvent

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
        source_ip=client_address(request),
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


# The transaction-local setting the audit trigger reads (migration 0005): while it holds a
# cutoff, the owner of the table, and only it, may delete the rows older than that cutoff.
ARCHIVE_CUTOFF_SETTING = "portal.audit_archive_cutoff"


def _json_value(value: Any) -> str:
    """JSON for what the database gives besides str, int, dict: the times, exactly."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _export(events: "models.QuerySet[AuditEvent]", path: Path, batch_size: int) -> tuple[int, int]:
    """Write `events` to `path` as gzipped JSON lines, fsynced; (how many, the highest id).

    Rows are read `batch_size` at a time (a server-side cursor on PostgreSQL), so memory stays
    flat however many there are.
    """
    fields = [field.attname for field in AuditEvent._meta.concrete_fields]
    count, last_id = 0, 0
    with path.open("xb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb") as compressed:
            for row in events.order_by("id").values(*fields).iterator(chunk_size=batch_size):
                line = json.dumps(row, default=_json_value, ensure_ascii=False)
                compressed.write(line.encode() + b"\n")
                count, last_id = count + 1, row["id"]
        raw.flush()
        os.fsync(raw.fileno())
    return count, last_id


def _read_back(path: Path) -> tuple[int, str]:
    """The number of lines in the gzipped file and the SHA-256 of the file as stored."""
    digest = hashlib.sha256()
    with path.open("rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest.update(block)
    with gzip.open(path, "rb") as lines:
        count = sum(1 for _ in lines)
    return count, digest.hexdigest()


def _archive_cutoff_set(connection: BaseDatabaseWrapper, value: str) -> None:
    """Set (or with "" clear) the trigger's setting until the transaction ends (PostgreSQL)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config(%s, %s, true)", [ARCHIVE_CUTOFF_SETTING, value])


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def audit_archive(
    *, cutoff: datetime, directory: Path, batch_size: int = 1000
) -> AuditArchive | None:
    """Move the audit events older than `cutoff` to a file in `directory`, then delete them.

    The file (`audit-<cutoff>-<now>.jsonl.gz`, one JSON object per event with every field) is
    written, fsynced and read back before anything is deleted; the delete, an `AuditArchive`
    row and the `audit.archive` event (count, cutoff, file, checksum) commit in one
    transaction. If that transaction fails the file is removed again and nothing is deleted.
    Returns None, writing nothing, when no event is that old. On PostgreSQL the delete passes
    the audit trigger only when connected as the table's owner (migration 0005).
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    path = (
        directory / f"audit-{cutoff.astimezone(UTC):%Y%m%dT%H%M%SZ}-{now:%Y%m%dT%H%M%S%fZ}.jsonl.gz"
    )
    partial = path.with_name(path.name + ".partial")
    try:
        with transaction.atomic():
            connection = transaction.get_connection()
            _archive_cutoff_set(connection, cutoff.isoformat())
            expired = AuditEvent.objects.filter(at__lt=cutoff)
            count, last_id = _export(expired, partial, batch_size)
            if count == 0:
                partial.unlink()
                _archive_cutoff_set(connection, "")
                return None
            written, sha256 = _read_back(partial)
            if written != count:
                raise Conflict(f"{partial} holds {written} events, not {count}: nothing deleted")
            partial.rename(path)
            _fsync_directory(directory)
            archive = AuditArchive.objects.create(
                cutoff=cutoff, count=count, file=path.name, sha256=sha256
            )
            audit_record(
                actor=None,
                action="audit.archive",
                target=archive,
                changes={
                    "count": [None, count],
                    "cutoff": [None, cutoff.isoformat()],
                    "file": [None, path.name],
                    "sha256": [None, sha256],
                },
            )
            # One statement, whatever the count (the ORM's delete may collect rows first).
            with connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {AuditEvent._meta.db_table} WHERE at < %s AND id <= %s",  # noqa: S608  (the model's own table)
                    [cutoff, last_id],
                )
                deleted = cursor.rowcount
            if deleted != count:
                raise Conflict(f"{deleted} events to delete, {count} archived: nothing deleted")
            # Called inside a longer transaction, the rest of it must not delete.
            _archive_cutoff_set(connection, "")
    except BaseException:
        partial.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        raise
    return archive
