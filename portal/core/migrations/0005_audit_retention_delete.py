"""Let the audit trigger allow one DELETE: `audit_archive` removing archived, expired events.

The trigger of 0002 refused every UPDATE and DELETE. Now a DELETE passes only when all hold:
the transaction set `portal.audit_archive_cutoff` (transaction-local, which `audit_archive`
does), the current role owns the table (the runtime role never does, so it cannot use this even
if it sets the setting and is granted DELETE), and the row is older than that cutoff. UPDATE
stays refused. Existing rows are untouched; on other databases (the SQLite demo) nothing is done.

TRUNCATE is not guarded by a trigger: the test suite's flush truncates every table as the owner,
and the owner can drop any trigger anyway. The runtime role is refused TRUNCATE by its grants.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

ALLOW_ARCHIVE = """
CREATE OR REPLACE FUNCTION core_auditevent_refuse_change() RETURNS trigger AS $$
DECLARE
    cutoff text := current_setting('portal.audit_archive_cutoff', true);
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(cutoff, '') <> '' THEN
        IF current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID)
           AND OLD.at < cutoff::timestamptz THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

REFUSE_ALL = """
CREATE OR REPLACE FUNCTION core_auditevent_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def allow_archive(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(ALLOW_ARCHIVE, params=None)


def refuse_all(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REFUSE_ALL, params=None)


class Migration(migrations.Migration):
    dependencies = [("core", "0004_audit_archive")]

    operations = [migrations.RunPython(allow_archive, refuse_all)]
