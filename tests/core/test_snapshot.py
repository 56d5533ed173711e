"""A polled page's reads see one moment (portal.core.pages.one_snapshot): a change committed
between two of its queries is in neither, so polling never stops on half of it."""

import threading

import pytest
from django.db import connection

from portal.core.pages import one_snapshot
from tenants.models import Tenant


def _renamed_elsewhere(pk: int, name: str) -> None:
    """Commit a rename from another connection (a thread has its own), as another request."""

    def rename() -> None:
        try:
            Tenant.objects.filter(pk=pk).update(name=name)
        finally:
            connection.close()

    thread = threading.Thread(target=rename)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_reads_in_one_snapshot_do_not_see_a_commit_between_them(tenant_a) -> None:
    with one_snapshot():
        before = Tenant.objects.get(pk=tenant_a.pk).name
        _renamed_elsewhere(tenant_a.pk, "renamed")
        during = Tenant.objects.get(pk=tenant_a.pk).name

    assert before == during == tenant_a.name
    assert Tenant.objects.get(pk=tenant_a.pk).name == "renamed"


@pytest.mark.django_db(transaction=True)
def test_without_it_the_second_read_sees_the_commit(tenant_a) -> None:
    # What one_snapshot is for: each statement of READ COMMITTED sees what is committed then.
    before = Tenant.objects.get(pk=tenant_a.pk).name
    _renamed_elsewhere(tenant_a.pk, "renamed")
    during = Tenant.objects.get(pk=tenant_a.pk).name

    assert (before, during) == (tenant_a.name, "renamed")
