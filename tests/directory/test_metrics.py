"""The Keycloak sync on /metrics: what the stuck-sync alerts read."""

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from portal.directory.models import ChangeKind, ChangeState, DirectoryChange, DirectoryReport
from tests.scrape import scraped


def _change(slug: str, state: ChangeState, minutes_ago: int) -> DirectoryChange:
    change = DirectoryChange.objects.create(kind=ChangeKind.TENANT, tenant_slug=slug, state=state)
    DirectoryChange.objects.filter(pk=change.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    change.refresh_from_db()
    return change


def _report(ok: bool, minutes_ago: int) -> DirectoryReport:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return DirectoryReport.objects.create(started_at=at, finished_at=at, ok=ok)


def test_the_sync_queue_and_last_good_reconcile_are_metrics(client: Client, db, settings) -> None:
    settings.KEYCLOAK_SYNC = True
    settings.KEYCLOAK_SYNC_SECONDS = 900
    _change("sent", ChangeState.SENT, minutes_ago=90)
    oldest = _change("vision", ChangeState.PENDING, minutes_ago=40)
    _change("nlp", ChangeState.PENDING, minutes_ago=5)
    _change("refused", ChangeState.FAILED, minutes_ago=60)
    good = _report(ok=True, minutes_ago=50)
    _report(ok=False, minutes_ago=20)

    assert scraped(client, "portal_directory_changes") == {
        (("state", "pending"),): 2.0,
        (("state", "failed"),): 1.0,
    }
    assert scraped(client, "portal_directory_oldest_pending_change_timestamp_seconds") == {
        (): oldest.created_at.timestamp()
    }
    assert scraped(client, "portal_directory_reconcile_interval_seconds") == {(): 900.0}
    assert scraped(client, "portal_directory_reconcile_last_success_timestamp_seconds") == {
        (): good.finished_at.timestamp()
    }


def test_nothing_about_the_sync_while_it_is_off(client: Client, db, settings) -> None:
    settings.KEYCLOAK_SYNC = False
    _change("vision", ChangeState.PENDING, minutes_ago=40)

    assert scraped(client, "portal_directory_changes") == {}
    assert scraped(client, "portal_directory_reconcile_interval_seconds") == {}


def test_an_empty_queue_counts_zero_and_has_no_oldest_change(client: Client, db, settings) -> None:
    settings.KEYCLOAK_SYNC = True

    assert scraped(client, "portal_directory_changes") == {
        (("state", "pending"),): 0.0,
        (("state", "failed"),): 0.0,
    }
    assert scraped(client, "portal_directory_oldest_pending_change_timestamp_seconds") == {}
    assert scraped(client, "portal_directory_reconcile_last_success_timestamp_seconds") == {}
