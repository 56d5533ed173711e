from django.db import migrations, models

# The statements closed before: their lines counted once here (the close writes them at
# positions 1 to the count, so the count is also the last position).
COUNT_LINES = (
    "UPDATE billing_statement SET line_count = (SELECT COUNT(*) FROM billing_statementline"
    " WHERE billing_statementline.statement_id = billing_statement.id)"
)


class Migration(migrations.Migration):
    dependencies = [("billing", "0006_statement_line_index_not_repeated")]

    operations = [
        migrations.AddField(
            model_name="statement",
            name="line_count",
            field=models.PositiveIntegerField(default=0, db_default=0),
        ),
        migrations.RunSQL(COUNT_LINES, reverse_sql=migrations.RunSQL.noop, elidable=True),
    ]
