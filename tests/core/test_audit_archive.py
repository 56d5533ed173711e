"""Retention of audit events: `manage.py audit_archive` writes the events past the retention to
a gzipped JSON lines file, then deletes them and records an audit event of its own; the trigger
refuses every other DELETE. The test database is migrated by its owner, as production's
migration Job is (the runtime role's side: tests/core/test_audit_roles.py)."""

import gzip
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from portal.core.audit import audit_record
from portal.core.models import AuditArchive, AuditEvent

ROOT = Path(__file__).resolve().parents[2]
FIELDS = [field.attname for field in AuditEvent._meta.concrete_fields]


def event_aged(days: float, action: str, tenant: Any = None) -> AuditEvent:
    """An event recorded `days` ago (`at` is set on insert, and rows cannot be updated)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO core_auditevent (at, actor_name, action, target_type, target_id, "
            "target_name, tenant_id, changes, comment, request_id, source_ip, user_agent) "
            "VALUES (%s, 'ada', %s, 'tenants.tenant', '7', 'Vision', %s, "
            """'{"state": ["active", "suspended"]}', 'a comment', 'req-1', '10.0.0.9', 'curl')"""
            " RETURNING id",
            [datetime.now(UTC) - timedelta(days=days), action, tenant.pk if tenant else None],
        )
        [event_id] = cursor.fetchone()
    return AuditEvent.objects.get(pk=event_id)


def delete_event(event_id: int, *, cutoff: datetime | None = None) -> None:
    """DELETE one event in a transaction, with the archive's setting set to `cutoff` if given."""
    with transaction.atomic(), connection.cursor() as cursor:
        if cutoff is not None:
            cursor.execute(
                "SELECT set_config('portal.audit_archive_cutoff', %s, true)", [cutoff.isoformat()]
            )
        cursor.execute("DELETE FROM core_auditevent WHERE id = %s", [event_id])


def archive(tmp_path: Path, *arguments: str) -> str:
    out = StringIO()
    call_command("audit_archive", "--directory", str(tmp_path), *arguments, stdout=out)
    return out.getvalue()


def test_expired_events_go_to_a_gzip_file_with_every_field_and_are_deleted(
    tenant_a, tmp_path: Path
) -> None:
    expired = [event_aged(400 + n, f"test.expired{n}", tenant_a) for n in range(5)]
    kept = event_aged(399, "test.kept")

    output = archive(tmp_path, "--batch-size", "2")

    [path] = tmp_path.iterdir()
    assert path.name.endswith(".jsonl.gz")
    assert str(path) in output
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        written = [json.loads(line) for line in lines]
    assert [line["id"] for line in written] == sorted(event.pk for event in expired)
    first = next(line for line in written if line["id"] == expired[0].pk)
    assert list(first) == FIELDS
    assert first["at"] == expired[0].at.isoformat()
    assert first["tenant_id"] == tenant_a.pk
    assert first["changes"] == {"state": ["active", "suspended"]}
    assert (first["source_ip"], first["user_agent"], first["comment"]) == (
        "10.0.0.9",
        "curl",
        "a comment",
    )
    assert not AuditEvent.objects.filter(pk__in=[event.pk for event in expired]).exists()
    assert AuditEvent.objects.filter(pk=kept.pk).exists()


def test_the_archive_records_an_audit_event_with_count_cutoff_file_and_checksum(
    tmp_path: Path, db: None
) -> None:
    event_aged(500, "test.expired")
    event_aged(420, "test.expired")

    archive(tmp_path)

    [path] = tmp_path.iterdir()
    record = AuditArchive.objects.get()
    event = AuditEvent.objects.get(action="audit.archive")
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (record.count, record.file, record.sha256) == (2, path.name, sha256)
    assert event.actor is None
    assert (event.target_type, event.target_id) == ("core.auditarchive", str(record.pk))
    assert event.changes["count"] == [None, 2]
    assert event.changes["file"] == [None, path.name]
    assert event.changes["sha256"] == [None, sha256]
    cutoff = datetime.fromisoformat(event.changes["cutoff"][1])
    assert abs(cutoff - (datetime.now(UTC) - timedelta(days=400))) < timedelta(minutes=1)


def test_the_retention_is_configurable(tmp_path: Path, db: None) -> None:
    week_old = event_aged(8, "test.week_old")

    archive(tmp_path)
    assert AuditEvent.objects.filter(pk=week_old.pk).exists()

    archive(tmp_path, "--days", "7")
    assert not AuditEvent.objects.filter(pk=week_old.pk).exists()


def test_nothing_past_the_retention_writes_no_file_and_no_event(tmp_path: Path, db: None) -> None:
    event_aged(30, "test.recent")

    output = archive(tmp_path)

    assert "nothing to do" in output
    assert list(tmp_path.iterdir()) == []
    assert not AuditEvent.objects.filter(action="audit.archive").exists()
    assert AuditEvent.objects.filter(action="test.recent").exists()
    # Nor is the archive's setting left behind for the rest of the transaction.
    old = event_aged(500, "test.expired_after")
    with pytest.raises(DatabaseError, match="append-only"):
        delete_event(old.pk)


def test_the_trigger_refuses_a_delete_without_the_archive_setting(db: None) -> None:
    expired = event_aged(900, "test.expired")

    with pytest.raises(DatabaseError, match="append-only"):
        delete_event(expired.pk)

    assert AuditEvent.objects.filter(pk=expired.pk).exists()


def test_the_archive_setting_lets_no_event_newer_than_its_cutoff_be_deleted(db: None) -> None:
    recent = event_aged(10, "test.recent")

    with pytest.raises(DatabaseError, match="append-only"):
        delete_event(recent.pk, cutoff=datetime.now(UTC) - timedelta(days=400))

    assert AuditEvent.objects.filter(pk=recent.pk).exists()


def test_the_archive_setting_ends_with_the_archive(tmp_path: Path, db: None) -> None:
    event_aged(500, "test.expired")
    archive(tmp_path)  # here inside the test's transaction, which goes on
    later = event_aged(500, "test.expired_later")

    with pytest.raises(DatabaseError, match="append-only"):
        delete_event(later.pk)


def test_audit_record_still_appends_beside_the_archive(tmp_path: Path, tenant_a) -> None:
    event_aged(500, "test.expired")
    archive(tmp_path)

    with transaction.atomic():
        recorded = audit_record(actor=None, action="test.after", target=tenant_a)

    assert AuditEvent.objects.filter(pk=recorded.pk).exists()


def test_the_demo_on_sqlite_archives_without_a_trigger(tmp_path: Path) -> None:
    database = tmp_path / "demo.sqlite3"
    environment = {
        "PATH": os.environ["PATH"],
        "DEBUG": "true",
        "DATABASE_URL": f"sqlite:///{database}",
        "PORTAL_AUDIT_ARCHIVE_DIR": str(tmp_path / "archive"),
    }

    def manage(*arguments: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *arguments],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    manage("migrate", "--noinput")
    with sqlite3.connect(database) as demo:
        demo.execute(
            "INSERT INTO core_auditevent (at, actor_name, action, target_type, target_id, "
            "target_name, changes, comment, request_id, user_agent) VALUES "
            "(?, '', 'test.expired', 'x.y', '1', '', '{}', '', '', '')",
            [(datetime.now(UTC) - timedelta(days=401)).strftime("%Y-%m-%d %H:%M:%S")],
        )

    output = manage("audit_archive")

    assert "Archived 1 audit events" in output
    [path] = (tmp_path / "archive").iterdir()
    with gzip.open(path, "rt") as lines:
        assert [json.loads(line)["action"] for line in lines] == ["test.expired"]
    with sqlite3.connect(database) as demo:
        actions = [row[0] for row in demo.execute("SELECT action FROM core_auditevent")]
    assert actions == ["audit.archive"]
