# Existing rate cards get no CPU or memory price: CPU and memory stay uncharged on them.

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0002_budget"),
    ]

    operations = [
        migrations.AddField(
            model_name="ratecard",
            name="price_per_cpu_core_hour",
            field=models.DecimalField(
                blank=True,
                decimal_places=4,
                help_text="Empty: CPU is not charged",
                max_digits=14,
                null=True,
                validators=[django.core.validators.MinValueValidator(0)],
            ),
        ),
        migrations.AddField(
            model_name="ratecard",
            name="price_per_ram_gib_hour",
            field=models.DecimalField(
                blank=True,
                decimal_places=4,
                help_text="Empty: memory is not charged",
                max_digits=14,
                null=True,
                validators=[django.core.validators.MinValueValidator(0)],
            ),
        ),
    ]
