# Existing usage records and rollup rows get 0 CPU core-hours and 0 memory GiB-hours: re-collect
# a window (or `metering_begin`) to fill them from Prometheus.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metering", "0002_capacity"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagedaily",
            name="cpu_core_hours",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=20),
        ),
        migrations.AddField(
            model_name="usagedaily",
            name="ram_gib_hours",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=20),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="cpu_core_hours",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=20),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="ram_gib_hours",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=20),
        ),
    ]
