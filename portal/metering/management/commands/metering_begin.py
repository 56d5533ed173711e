from datetime import UTC, date, datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.cluster.models import Cluster
from portal.metering.collection import metering_begin


class Command(BaseCommand):
    help = (
        "Meter a cluster from the start of a day (UTC): its usage is collected again from then, "
        "hour by hour, in order, by the periodic task (as far back as its Prometheus keeps data)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="the cluster's name")
        parser.add_argument("day", help="the first day to meter, YYYY-MM-DD")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["cluster"]).first()
        if cluster is None:
            raise CommandError(f"No cluster is named {options['cluster']!r}.")
        try:
            day = date.fromisoformat(options["day"])
        except ValueError:
            raise CommandError(f"{options['day']!r} is not a date like 2026-01-31.") from None
        if day > datetime.now(UTC).date():
            raise CommandError("The first day to meter cannot be in the future.")
        state = metering_begin(cluster=cluster, at=datetime.combine(day, time(), tzinfo=UTC))
        self.stdout.write(
            self.style.SUCCESS(
                f"Cluster {cluster.name} is metered from {state.begins_at:%Y-%m-%d %H:%M} UTC; "
                "the periodic task collects the hours since then in order."
            )
        )
