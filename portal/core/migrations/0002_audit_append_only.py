"""Make the audit table append-only on PostgreSQL: a trigger refuses UPDATE and DELETE.

Existing rows are untouched. On other databases (the SQLite demo) nothing is done; there the
guarantee rests on the code, which has no update or delete path for audit events.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

CREATE = """
CREATE FUNCTION core_auditevent_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER core_auditevent_append_only
    BEFORE UPDATE OR DELETE ON core_auditevent
    FOR EACH ROW EXECUTE FUNCTION core_auditevent_refuse_change();
"""

DROP = """
DROP TRIGGER IF EXISTS core_auditevent_append_only ON core_auditevent;
DROP FUNCTION IF EXISTS core_auditevent_refuse_change();
"""


def create_guard(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def drop_guard(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial")]

    operations = [migrations.RunPython(create_guard, drop_guard)]
