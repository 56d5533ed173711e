"""The two database roles of production, on PostgreSQL: the owner migrates (and archives), the
runtime role the portal connects as may only INSERT and SELECT audit events, and cannot TRUNCATE
the table, touch its trigger, or use the archive's way around it.

One scratch database for the module, made as deploy/README.md ("Database roles") says and
migrated by `manage.py migrate` connected as the owner, as the Helm chart's migration Job is.
"""

import gzip
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]

INSERT_EVENT = """
INSERT INTO core_auditevent (at, actor_name, action, target_type, target_id, target_name,
    changes, comment, request_id, user_agent)
VALUES (now() - make_interval(days => %s), '', %s, 'test.thing', '1', '', '{}', '', '', '')
RETURNING id
"""


@dataclass(frozen=True)
class Scratch:
    owner: str
    runtime: str
    owner_url: str
    runtime_url: str

    def connect(self, url: str) -> psycopg.Connection:
        return psycopg.connect(url, autocommit=True)


def scalar(database: psycopg.Connection, query: str, params: Sequence[Any] = ()) -> Any:
    """The one value the query answers."""
    row = database.execute(query, params).fetchone()
    assert row is not None, query
    return row[0]


def delete_event(database: psycopg.Connection, event_id: int, *, cutoff: str | None) -> int:
    """DELETE one event in a transaction, with the archive's setting set to `cutoff` if given."""
    with database.transaction():
        if cutoff is not None:
            database.execute("SELECT set_config('portal.audit_archive_cutoff', %s, true)", [cutoff])
        return database.execute("DELETE FROM core_auditevent WHERE id = %s", [event_id]).rowcount


def manage(*arguments: str, url: str, runtime_role: str) -> subprocess.CompletedProcess[str]:
    """`manage.py` in a fresh process connected with `url`, as a Job or CronJob runs it."""
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "SECRET_KEY": "k" * 50,
            "DATABASE_URL": url,
            "PORTAL_DATABASE_RUNTIME_ROLE": runtime_role,
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def scratch() -> Iterator[Scratch]:
    # The harness's server, as its superuser (trust authentication), in its maintenance database.
    server = urlsplit(os.environ["DATABASE_URL"])
    maintenance = server._replace(path="/postgres").geturl()
    suffix = secrets.token_hex(4)
    owner, runtime, database = (
        f"portal_owner_{suffix}",
        f"portal_runtime_{suffix}",
        f"audit_roles_{suffix}",
    )
    with psycopg.connect(maintenance, autocommit=True) as admin:
        for statement in (
            "CREATE ROLE {owner} LOGIN",
            "CREATE ROLE {runtime} LOGIN",
            "CREATE DATABASE {database} OWNER {owner}",
            "REVOKE ALL ON DATABASE {database} FROM PUBLIC",
            "GRANT CONNECT ON DATABASE {database} TO {runtime}",
        ):
            admin.execute(
                sql.SQL(statement).format(
                    owner=sql.Identifier(owner),
                    runtime=sql.Identifier(runtime),
                    database=sql.Identifier(database),
                )
            )
        base = f"postgres://{{}}@{server.hostname}:{server.port}/{database}"
        found = Scratch(owner, runtime, base.format(owner), base.format(runtime))
        try:
            migrated = manage("migrate", "--noinput", url=found.owner_url, runtime_role=runtime)
            assert migrated.returncode == 0, migrated.stderr
            yield found
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )
            admin.execute(
                sql.SQL("DROP ROLE IF EXISTS {}, {}").format(
                    sql.Identifier(owner), sql.Identifier(runtime)
                )
            )


def test_the_migrated_tables_belong_to_the_owner(scratch: Scratch) -> None:
    with scratch.connect(scratch.runtime_url) as runtime:
        owner = scalar(
            runtime, "SELECT tableowner FROM pg_tables WHERE tablename = 'core_auditevent'"
        )

    assert owner == scratch.owner


def test_the_runtime_role_inserts_and_reads_audit_events(scratch: Scratch) -> None:
    with scratch.connect(scratch.runtime_url) as runtime:
        event_id = scalar(runtime, INSERT_EVENT, [0, "test.runtime_insert"])
        action = scalar(runtime, "SELECT action FROM core_auditevent WHERE id = %s", [event_id])

    assert action == "test.runtime_insert"


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE core_auditevent SET action = 'forged'",
        "DELETE FROM core_auditevent",
        "TRUNCATE core_auditevent",
        "TRUNCATE core_auditevent CASCADE",
        "ALTER TABLE core_auditevent DISABLE TRIGGER core_auditevent_append_only",
        "ALTER TABLE core_auditevent DISABLE TRIGGER ALL",
        "DROP TRIGGER core_auditevent_append_only ON core_auditevent",
        (
            "CREATE OR REPLACE FUNCTION core_auditevent_refuse_change() RETURNS trigger AS "
            "$$ BEGIN RETURN OLD; END; $$ LANGUAGE plpgsql"
        ),
        "ALTER TABLE core_auditevent RENAME TO core_auditevent_old",
        "DROP TABLE core_auditevent",
        (
            "INSERT INTO core_auditarchive (at, cutoff, count, file, sha256) "
            "VALUES (now(), now(), 0, 'forged', '')"
        ),
        "DELETE FROM core_auditarchive",
        "DELETE FROM django_migrations WHERE app = 'core'",
    ],
)
def test_the_runtime_role_cannot_alter_the_audit_trail(scratch: Scratch, statement: str) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        owner.execute(INSERT_EVENT, [0, "test.kept"])
    with scratch.connect(scratch.runtime_url) as runtime:
        # Refused by the privileges themselves, before the trigger has a say.
        with pytest.raises(
            psycopg.errors.InsufficientPrivilege, match=r"permission denied|must be owner"
        ):
            runtime.execute(statement)
        kept = scalar(runtime, "SELECT count(*) FROM core_auditevent WHERE action = 'test.kept'")
        enabled = scalar(
            runtime, "SELECT tgenabled FROM pg_trigger WHERE tgname = 'core_auditevent_append_only'"
        )

    assert kept >= 1
    assert enabled == "O"


PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


@pytest.mark.parametrize(
    ("table", "granted"),
    [
        ("core_auditevent", {"SELECT", "INSERT"}),
        ("core_auditarchive", {"SELECT"}),
        ("django_migrations", {"SELECT"}),
        ("core_workerheartbeat", {"SELECT", "INSERT", "UPDATE", "DELETE"}),
        ("tenants_tenant", {"SELECT", "INSERT", "UPDATE", "DELETE"}),
    ],
)
def test_the_runtime_role_holds_exactly_the_privileges_it_needs(
    scratch: Scratch, table: str, granted: set[str]
) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        held = {
            privilege
            for privilege in PRIVILEGES
            if scalar(
                owner, "SELECT has_table_privilege(%s, %s, %s)", [scratch.runtime, table, privilege]
            )
        }

    assert held == granted


def test_the_runtime_role_writes_the_other_tables(scratch: Scratch) -> None:
    with scratch.connect(scratch.runtime_url) as runtime:
        runtime.execute(
            "INSERT INTO core_workerheartbeat (worker, beat_at) VALUES ('celery@a', now())"
        )
        runtime.execute("UPDATE core_workerheartbeat SET beat_at = now() WHERE worker = 'celery@a'")
        deleted = runtime.execute("DELETE FROM core_workerheartbeat WHERE worker = 'celery@a'")

    assert deleted.rowcount == 1


def test_the_runtime_role_cannot_delete_expired_events_even_with_the_archive_setting(
    scratch: Scratch,
) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        event_id = scalar(owner, INSERT_EVENT, [500, "test.expired"])
        # Even granted DELETE, the trigger lets only the table's owner through.
        owner.execute(
            sql.SQL("GRANT DELETE ON core_auditevent TO {}").format(sql.Identifier(scratch.runtime))
        )
        try:
            with (
                scratch.connect(scratch.runtime_url) as runtime,
                pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"),
            ):
                delete_event(runtime, event_id, cutoff="2999-01-01T00:00:00+00:00")
        finally:
            owner.execute(
                sql.SQL("REVOKE DELETE ON core_auditevent FROM {}").format(
                    sql.Identifier(scratch.runtime)
                )
            )
        left = scalar(owner, "SELECT count(*) FROM core_auditevent WHERE id = %s", [event_id])

    assert left == 1


def test_the_owner_deletes_only_events_older_than_the_archive_cutoff(scratch: Scratch) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        old_id = scalar(owner, INSERT_EVENT, [500, "test.owner_old"])
        new_id = scalar(owner, INSERT_EVENT, [10, "test.owner_new"])
        cutoff = scalar(owner, "SELECT (now() - interval '400 days')::text")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            delete_event(owner, old_id, cutoff=None)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            delete_event(owner, new_id, cutoff=cutoff)
        deleted = delete_event(owner, old_id, cutoff=cutoff)

    assert deleted == 1


def test_the_archive_command_as_the_owner_exports_and_deletes_expired_events(
    scratch: Scratch, tmp_path: Path
) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        old_id = scalar(owner, INSERT_EVENT, [401, "test.archived"])
        new_id = scalar(owner, INSERT_EVENT, [399, "test.retained"])

    result = manage(
        "audit_archive", "--directory", str(tmp_path), url=scratch.owner_url, runtime_role=""
    )

    assert result.returncode == 0, result.stderr
    [archive] = tmp_path.glob("audit-*.jsonl.gz")
    with gzip.open(archive, "rt") as lines:
        archived = {event["id"]: event for event in map(json.loads, lines)}
    assert archived[old_id]["action"] == "test.archived"
    assert new_id not in archived
    with scratch.connect(scratch.runtime_url) as runtime:
        left = {row[0] for row in runtime.execute("SELECT id FROM core_auditevent").fetchall()}
        recorded = scalar(
            runtime,
            "SELECT changes FROM core_auditevent WHERE action = 'audit.archive' "
            "ORDER BY id DESC LIMIT 1",
        )
    assert old_id not in left
    assert new_id in left
    assert recorded["file"] == [None, archive.name]


def test_the_archive_command_as_the_runtime_role_deletes_nothing_and_keeps_no_file(
    scratch: Scratch, tmp_path: Path
) -> None:
    with scratch.connect(scratch.owner_url) as owner:
        old_id = scalar(owner, INSERT_EVENT, [450, "test.not_archived"])

    result = manage(
        "audit_archive", "--directory", str(tmp_path), url=scratch.runtime_url, runtime_role=""
    )

    assert result.returncode != 0
    assert "permission denied" in result.stderr
    assert list(tmp_path.iterdir()) == []
    with scratch.connect(scratch.runtime_url) as runtime:
        left = scalar(runtime, "SELECT count(*) FROM core_auditevent WHERE id = %s", [old_id])
    assert left == 1


def test_migrate_refuses_a_runtime_role_that_could_alter_the_audit_trail(
    scratch: Scratch,
) -> None:
    as_itself = manage("migrate", "--noinput", url=scratch.owner_url, runtime_role=scratch.owner)
    unknown = manage("migrate", "--noinput", url=scratch.owner_url, runtime_role="nobody_here")

    assert as_itself.returncode != 0
    assert "could alter the audit trail" in as_itself.stderr
    assert unknown.returncode != 0
    assert "'nobody_here', which is no role" in unknown.stderr
