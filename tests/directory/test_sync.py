"""The directory sync against the Keycloak double: groups for new tenants, membership changes
sent in order, outages, refusals and an admin's retry, through the services and the tasks."""

import threading

import pytest
from django.db import connections
from django.test import override_settings

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.core.errors import Conflict, InvalidTransition
from portal.core.models import AuditEvent
from portal.directory.models import DirectoryChange
from portal.directory.services import (
    MAX_HELD_ATTEMPTS,
    directory_change_retry,
    directory_changes_send,
    directory_member_queue,
)
from portal.directory.tasks import reconcile_directory, send_directory_changes
from tenants.models import MemberRole, Membership, Tenant
from tenants.services import membership_remove, membership_set, tenant_create
from tests.conftest import wait_until
from tests.directory.support import DEVELOPERS, LEADS, changes, send
from tests.keycloak.server import KeycloakDouble


def person(username: str) -> User:
    return user_create(actor=None, username=username)


@pytest.fixture
def genomics(db) -> Tenant:
    return tenant_create(actor=None, slug="genomics", name="Genomics Lab")


def test_creating_a_tenant_creates_its_groups_once_the_change_is_sent(keycloak_api, db):
    tenant_create(actor=None, slug="genomics", name="Genomics Lab")
    [change] = changes()
    assert (change.kind, change.tenant_slug, change.state) == ("tenant", "genomics", "pending")
    assert keycloak_api.group_paths() == set()

    assert send() == {"sent": 1, "failed": 0, "held": ""}

    assert keycloak_api.group_paths() == {
        "/gpu-portal",
        "/gpu-portal/tenants",
        "/gpu-portal/tenants/genomics",
        LEADS.format("genomics"),
        DEVELOPERS.format("genomics"),
    }
    change.refresh_from_db()
    assert (change.state, change.attempts, change.sent_at is not None) == ("sent", 1, True)
    # Sending again changes nothing: there is nothing pending.
    assert send() == {"sent": 0, "failed": 0, "held": ""}


def test_a_second_tenant_reuses_the_groups_above_it(keycloak_api, db):
    tenant_create(actor=None, slug="genomics", name="Genomics Lab")
    send()
    tenant_create(actor=None, slug="nlp", name="Language Models")
    send()
    created = keycloak_api.requests_to("POST", "/groups")
    # /gpu-portal, tenants, genomics and its two, then nlp and its two.
    assert len(created) == 8
    assert DEVELOPERS.format("nlp") in keycloak_api.group_paths()


def test_with_the_sync_off_nothing_is_queued(db):
    with override_settings(KEYCLOAK_SYNC=False, PORTAL_MEMBERSHIP_SOURCE="portal"):
        tenant = tenant_create(actor=None, slug="genomics", name="Genomics Lab")
        membership_set(actor=None, tenant=tenant, user=person("rhea"), role=MemberRole.LEAD)
        membership_remove(actor=None, tenant=tenant, username="rhea")
        assert send_directory_changes() == "sync off"
        assert reconcile_directory() == "sync off"
    assert changes() == []


def test_portal_membership_changes_reach_keycloak(portal_decides, genomics, admin_user):
    portal_decides.add_user("rhea")
    rhea = person("rhea")

    membership_set(actor=admin_user, tenant=genomics, user=rhea, role=MemberRole.LEAD)
    send()
    assert portal_decides.group_members(LEADS.format("genomics")) == {"rhea"}
    assert portal_decides.group_members(DEVELOPERS.format("genomics")) == set()

    membership_set(actor=admin_user, tenant=genomics, user=rhea, role=MemberRole.DEVELOPER)
    send()
    assert portal_decides.group_members(LEADS.format("genomics")) == set()
    assert portal_decides.group_members(DEVELOPERS.format("genomics")) == {"rhea"}

    membership_remove(actor=admin_user, tenant=genomics, username="rhea")
    send()
    assert portal_decides.group_members(DEVELOPERS.format("genomics")) == set()

    member_changes = [c for c in changes() if c.kind == "member"]
    assert [(c.username, c.role, c.state) for c in member_changes] == [
        ("rhea", "lead", "sent"),
        ("rhea", "developer", "sent"),
        ("rhea", "", "sent"),
    ]
    assert {c.actor for c in member_changes} == {admin_user}


def test_with_the_identity_provider_deciding_membership_changes_queue_nothing(
    keycloak_api, genomics
):
    membership_set(actor=None, tenant=genomics, user=person("rhea"), role=MemberRole.LEAD)
    membership_remove(actor=None, tenant=genomics, username="rhea")
    assert [change.kind for change in changes()] == ["tenant"]


def test_a_change_identical_to_the_latest_pending_one_is_not_queued_again(portal_decides, db):
    def queue(role: str) -> DirectoryChange | None:
        return directory_member_queue(
            tenant_slug="genomics", username="rhea", role=role, actor=None
        )

    first = queue("lead")
    assert queue("lead") == first
    queue("")
    # Not the same as the latest pending one (the removal): it is queued, and sent last.
    queue("lead")
    assert [change.role for change in changes()] == ["lead", "", "lead"]


def test_an_outage_keeps_changes_pending_in_order_then_delivers_them(portal_decides, genomics):
    send()  # the tenant's groups
    for name in ("rhea", "sam"):
        portal_decides.add_user(name)
    rhea, sam = person("rhea"), person("sam")
    portal_decides.outage = True

    # The portal keeps working: every change is made and queued.
    membership_set(actor=None, tenant=genomics, user=rhea, role=MemberRole.LEAD)
    membership_set(actor=None, tenant=genomics, user=sam, role=MemberRole.DEVELOPER)
    membership_set(actor=None, tenant=genomics, user=rhea, role=MemberRole.DEVELOPER)
    assert Membership.objects.filter(tenant=genomics).count() == 2

    held = send()
    assert held["sent"] == 0
    assert "503" in str(held["held"])
    send()
    first, second, third = changes()[1:]
    assert (first.state, first.attempts) == ("pending", 2)
    assert "503" in first.last_error
    assert "Service Unavailable" in first.last_error
    # Nothing overtook the first change.
    assert (second.attempts, third.attempts) == (0, 0)

    portal_decides.outage = False
    assert send() == {"sent": 3, "failed": 0, "held": ""}
    assert all(change.state == "sent" for change in changes())
    # Delivered in the order they were made: rhea ends up a developer, not a lead.
    assert portal_decides.group_members(LEADS.format("genomics")) == set()
    assert portal_decides.group_members(DEVELOPERS.format("genomics")) == {"rhea", "sam"}
    joins = [change[1:] for change in portal_decides.group_changes() if change[0] == "join"]
    assert joins == [
        ("rhea", LEADS.format("genomics")),
        ("sam", DEVELOPERS.format("genomics")),
        ("rhea", DEVELOPERS.format("genomics")),
    ]


def test_a_change_held_too_long_fails_visibly_and_lets_the_others_go(portal_decides, genomics):
    send()  # the tenant's groups
    portal_decides.add_user("rhea")
    rhea = person("rhea")
    membership_set(actor=None, tenant=genomics, user=rhea, role=MemberRole.LEAD)
    membership_set(actor=None, tenant=genomics, user=rhea, role=MemberRole.DEVELOPER)
    stuck = changes()[1]
    DirectoryChange.objects.filter(pk=stuck.pk).update(attempts=MAX_HELD_ATTEMPTS - 1)
    portal_decides.outage = True

    result = send()

    stuck.refresh_from_db()
    assert (stuck.state, stuck.attempts) == ("failed", MAX_HELD_ATTEMPTS)
    assert stuck.last_error.startswith(f"Gave up after {MAX_HELD_ATTEMPTS} attempts: ")
    assert result["failed"] == 1
    assert "503" in str(result["held"])  # the next change now heads the queue
    assert changes()[2].attempts == 1


def test_a_user_keycloak_does_not_know_fails_without_holding_the_queue(
    portal_decides, genomics, admin_user
):
    portal_decides.add_user("sam")
    membership_set(actor=admin_user, tenant=genomics, user=person("ghost"), role=MemberRole.LEAD)
    membership_set(actor=admin_user, tenant=genomics, user=person("sam"), role=MemberRole.LEAD)

    assert send() == {"sent": 2, "failed": 1, "held": ""}

    ghost = DirectoryChange.objects.get(username="ghost")
    assert ghost.state == "failed"
    assert "ghost does not exist in Keycloak" in ghost.last_error
    assert portal_decides.group_members(LEADS.format("genomics")) == {"sam"}
    event = AuditEvent.objects.get(action="directory_change.fail")
    assert (event.target_id, event.tenant) == (str(ghost.pk), genomics)
    assert event.changes == {"state": ["pending", "failed"]}

    # Once the user exists in Keycloak, an admin's retry sends it.
    portal_decides.add_user("ghost")
    retried = directory_change_retry(actor=admin_user, change_id=ghost.pk)
    assert (retried.state, retried.attempts) == ("pending", 0)
    assert AuditEvent.objects.filter(action="directory_change.retry", actor=admin_user).exists()
    assert send() == {"sent": 1, "failed": 0, "held": ""}
    assert portal_decides.group_members(LEADS.format("genomics")) == {"ghost", "sam"}


def test_removing_a_user_keycloak_does_not_know_is_already_done(portal_decides, genomics):
    membership_set(actor=None, tenant=genomics, user=person("ghost"), role=MemberRole.LEAD)
    membership_remove(actor=None, tenant=genomics, username="ghost")
    send()
    assert [(c.role, c.state) for c in changes()[1:]] == [("lead", "failed"), ("", "sent")]


def test_only_failed_changes_are_retried(portal_decides, genomics, admin_user):
    [pending] = changes()
    with pytest.raises(InvalidTransition, match="only failed changes are retried"):
        directory_change_retry(actor=admin_user, change_id=pending.pk)


def test_a_failed_change_is_not_retried_once_a_later_one_for_the_member_decides(
    portal_decides, genomics, admin_user
):
    ghost = person("ghost")
    membership_set(actor=None, tenant=genomics, user=ghost, role=MemberRole.LEAD)
    send()
    portal_decides.add_user("ghost")
    membership_set(actor=None, tenant=genomics, user=ghost, role=MemberRole.DEVELOPER)
    send()
    failed = DirectoryChange.objects.get(username="ghost", state="failed")
    with pytest.raises(Conflict, match="came after this one and is sent"):
        directory_change_retry(actor=admin_user, change_id=failed.pk)


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_send_the_same_change_and_never_overtake(portal_decides):
    tenant = tenant_create(actor=None, slug="genomics", name="Genomics Lab")
    names = [f"user{index}" for index in range(6)]
    for name in names:
        portal_decides.add_user(name)
        membership_set(actor=None, tenant=tenant, user=person(name), role=MemberRole.LEAD)
    portal_decides.latency = 0.02
    barrier = threading.Barrier(2)
    results = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(directory_changes_send())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sum(result.sent for result in results) == 7
    assert all(change.state == "sent" and change.attempts == 1 for change in changes())
    joined = [username for verb, username, _ in portal_decides.group_changes() if verb == "join"]
    assert joined == names


def test_a_worker_creates_a_new_tenants_groups(keycloak_api: KeycloakDouble, celery_worker):
    tenant_create(actor=None, slug="genomics", name="Genomics Lab")
    wait_until(
        lambda: DEVELOPERS.format("genomics") in keycloak_api.group_paths(),
        what="the worker to create the groups",
    )
    wait_until(
        lambda: DirectoryChange.objects.filter(state="sent").exists(),
        what="the change to be recorded as sent",
    )
