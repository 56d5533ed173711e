import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("billing", "0005_statement_line_order")]

    # Only the single-column index goes: the (statement, position) index begins with the
    # column. The foreign key stays as it is (Django would drop and add it again, checking
    # every line).
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="statementline",
                    name="statement",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="lines",
                        to="billing.statement",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql="DROP INDEX IF EXISTS billing_statementline_statement_id_55057473",
                    reverse_sql="CREATE INDEX IF NOT EXISTS billing_statementline_statement_id_55057473"
                    " ON billing_statementline (statement_id)",
                )
            ],
        ),
    ]
