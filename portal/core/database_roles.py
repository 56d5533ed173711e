"""The runtime role's privileges on PostgreSQL, granted after every `migrate`.

Production uses two roles (deploy/README.md, "Database roles"): the owner, which `migrate` and
`audit_archive` connect as and which owns every table, and the runtime role the web, worker
and beat processes connect as. Only the owner can TRUNCATE a table, ALTER it (disable or drop
its trigger) or DROP it, so none of that is open to the runtime role whatever it is granted. It
is granted ordinary reads and writes on every table, except that the audit trail is
append-only (INSERT and SELECT) and the archive records and Django's migration history are
read-only. Granting again after each `migrate` (post_migrate) covers the tables that migration
made, and is harmless when nothing changed.
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder
from psycopg import sql

from portal.core.models import AuditArchive, AuditEvent


def append_only_tables() -> list[str]:
    """Tables the runtime role may only INSERT into and SELECT from."""
    return [AuditEvent._meta.db_table]


def read_only_tables() -> list[str]:
    """Tables only the owner writes (audit_archive, migrate); the runtime role may SELECT."""
    return [AuditArchive._meta.db_table, MigrationRecorder.Migration._meta.db_table]


def runtime_role_grant(*, connection: BaseDatabaseWrapper, role: str) -> None:
    """Grant `role` what the portal needs in the current schema, and nothing that alters audit.

    Runs as the owner of the tables; refuses (ImproperlyConfigured) a runtime role that is the
    connected role, a member of it, or a superuser, since such a role could alter the audit
    trail whatever is granted.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolsuper, pg_has_role(rolname, current_user, 'MEMBER') "
            "FROM pg_roles WHERE rolname = %s",
            [role],
        )
        found = cursor.fetchone()
        if found is None:
            raise ImproperlyConfigured(
                f"PORTAL_DATABASE_RUNTIME_ROLE names {role!r}, which is no role of this database "
                "server: create it first (deploy/README.md, Database roles)"
            )
        superuser, owner_member = found
        if superuser or owner_member:
            raise ImproperlyConfigured(
                f"PORTAL_DATABASE_RUNTIME_ROLE names {role!r}, which is a superuser, the role "
                "migrate connects as, or a member of it: it could alter the audit trail. Run "
                "migrate as the owner role and the portal as a separate runtime role."
            )
        role_name = sql.Identifier(role)
        cursor.execute("SELECT current_schema()")
        [schema_name] = cursor.fetchone()
        schema = sql.Identifier(schema_name)
        statements = [
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role_name),
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                schema, role_name
            ),
            sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(
                schema, role_name
            ),
            # Tables made later by the owner, before the next post_migrate runs.
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA {} "
                "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {}"
            ).format(schema, role_name),
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT USAGE, SELECT ON SEQUENCES TO {}"
            ).format(schema, role_name),
        ]
        statements += [
            sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {} FROM {}").format(
                sql.Identifier(table), role_name
            )
            for table in append_only_tables()
        ]
        statements += [
            sql.SQL(
                "REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {} FROM {}"
            ).format(sql.Identifier(table), role_name)
            for table in read_only_tables()
        ]
        for statement in statements:
            cursor.execute(statement)


def grant_after_migrate(*, using: str, **kwargs: Any) -> None:
    """post_migrate receiver: grant PORTAL_DATABASE_RUNTIME_ROLE its privileges on PostgreSQL."""
    connection = connections[using]
    role = settings.PORTAL_DATABASE_RUNTIME_ROLE
    if role and connection.vendor == "postgresql":
        runtime_role_grant(connection=connection, role=role)
