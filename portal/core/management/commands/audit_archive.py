"""`python manage.py audit_archive [--days N] [--directory PATH]`: archive and remove the audit
events past their retention (PORTAL_AUDIT_RETENTION_DAYS, 400 days by default).

The only way audit events are ever deleted. Run it daily (the Helm chart's `auditArchive`
CronJob, or cron) with DATABASE_URL naming the owner role: on PostgreSQL the audit trigger lets
only the table's owner delete, and only events older than the cutoff.
"""

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.core.audit import audit_archive
from portal.core.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Write the audit events older than the retention to a gzipped JSON lines file, then "
        "delete them, recording an audit event of the run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=settings.PORTAL_AUDIT_RETENTION_DAYS,
            help="keep this many days (default PORTAL_AUDIT_RETENTION_DAYS)",
        )
        parser.add_argument(
            "--directory",
            type=Path,
            default=settings.PORTAL_AUDIT_ARCHIVE_DIR,
            help="where the file goes (default PORTAL_AUDIT_ARCHIVE_DIR)",
        )
        parser.add_argument(
            "--batch-size", type=int, default=1000, help="events read at a time (default 1000)"
        )

    def handle(
        self, *args: Any, days: int, directory: Path, batch_size: int, **options: Any
    ) -> None:
        if days < 1:
            raise CommandError("--days must be at least 1.")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        cutoff = datetime.now(UTC) - timedelta(days=days)
        try:
            archive = audit_archive(cutoff=cutoff, directory=directory, batch_size=batch_size)
        except ApplicationError as error:
            raise CommandError(error.message) from None
        if archive is None:
            self.stdout.write(f"No audit events before {cutoff:%Y-%m-%d %H:%M} UTC: nothing to do.")
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Archived {archive.count} audit events before {cutoff:%Y-%m-%d %H:%M} UTC to "
                f"{directory / archive.file} (sha256 {archive.sha256}) and deleted them."
            )
        )
