"""Reconcile: differences both ways, fixes in portal mode, reports only otherwise, outages."""

import pytest
from django.test import override_settings

from portal.accounts.services import user_create
from portal.core.models import AuditEvent
from portal.directory.models import DirectoryChange, DirectoryReport
from portal.directory.services import directory_reconcile
from portal.directory.tasks import reconcile_directory
from tenants.models import MemberRole
from tenants.services import membership_set, tenant_change_state, tenant_create
from tests.directory.support import DEVELOPERS, LEADS, send


@pytest.fixture
def drifted(db, keycloak_api, admin_user):
    """Tenant genomics with lead rhea and developer sam in the portal (made while the sync was
    off); in Keycloak sam is a lead and eve, unknown to the portal, a developer."""
    with override_settings(KEYCLOAK_SYNC=False):
        tenant = tenant_create(actor=None, slug="genomics", name="Genomics Lab")
        for name, role in (("rhea", MemberRole.LEAD), ("sam", MemberRole.DEVELOPER)):
            user = user_create(actor=None, username=name)
            membership_set(actor=None, tenant=tenant, user=user, role=role)
    keycloak_api.add_user("rhea")
    keycloak_api.add_to_group(LEADS.format("genomics"), "sam")
    keycloak_api.add_to_group(DEVELOPERS.format("genomics"), "eve")
    return tenant


EXPECTED = [
    {"tenant": "genomics", "role": "lead", "username": "rhea", "where": "portal"},
    {"tenant": "genomics", "role": "lead", "username": "sam", "where": "keycloak"},
    {"tenant": "genomics", "role": "developer", "username": "sam", "where": "portal"},
    {"tenant": "genomics", "role": "developer", "username": "eve", "where": "keycloak"},
]


def test_in_portal_mode_reconcile_reports_both_ways_and_makes_keycloak_match(drifted, keycloak_api):
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        report = directory_reconcile()
        assert report.ok
        assert report.differences == EXPECTED
        assert (report.tenants, report.changes_queued) == (1, 3)
        queued = DirectoryChange.objects.order_by("id")
        assert [(c.username, c.role) for c in queued] == [
            ("rhea", "lead"),
            ("sam", "developer"),
            ("eve", ""),
        ]
        assert AuditEvent.objects.filter(action="directory.reconcile").count() == 1

        send()
        assert keycloak_api.group_members(LEADS.format("genomics")) == {"rhea"}
        assert keycloak_api.group_members(DEVELOPERS.format("genomics")) == {"sam"}
        again = directory_reconcile()
    assert (again.differences, again.changes_queued) == ([], 0)


def test_with_the_identity_provider_deciding_reconcile_only_reports(drifted, keycloak_api):
    report = directory_reconcile()
    assert report.ok
    assert report.differences == EXPECTED
    assert report.changes_queued == 0
    assert not DirectoryChange.objects.exists()
    assert not AuditEvent.objects.filter(action="directory.reconcile").exists()
    assert keycloak_api.group_members(DEVELOPERS.format("genomics")) == {"eve"}


def test_reconcile_creates_missing_groups_and_skips_archived_tenants(keycloak_api, db, admin_user):
    with override_settings(KEYCLOAK_SYNC=False):
        tenant_create(actor=None, slug="genomics", name="Genomics Lab")
        old = tenant_create(actor=None, slug="old", name="Old Lab")
        tenant_change_state(actor=admin_user, tenant=old, action="archive")
    result = reconcile_directory()
    assert isinstance(result, dict)
    assert result["ok"] is True
    report = DirectoryReport.objects.get()
    assert (report.tenants, report.groups_created) == (1, 5)
    assert LEADS.format("genomics") in keycloak_api.group_paths()
    assert not any("/old" in path for path in keycloak_api.group_paths())


def test_a_pending_fix_is_not_queued_twice(drifted, keycloak_api):
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        directory_reconcile()
        second = directory_reconcile()
    assert second.changes_queued == 0
    assert DirectoryChange.objects.count() == 3


def test_reconcile_during_an_outage_reports_the_error_and_changes_nothing(drifted, keycloak_api):
    keycloak_api.outage = True
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        report = directory_reconcile()
    assert not report.ok
    assert "503" in report.error
    assert (report.differences, report.changes_queued) == ([], 0)
    assert not DirectoryChange.objects.exists()


def test_a_fix_keycloak_refused_is_not_queued_again_until_an_admin_retries(db, keycloak_api):
    with override_settings(KEYCLOAK_SYNC=False):
        tenant = tenant_create(actor=None, slug="genomics", name="Genomics Lab")
        ghost = user_create(actor=None, username="ghost")
        membership_set(actor=None, tenant=tenant, user=ghost, role=MemberRole.LEAD)
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        assert directory_reconcile().changes_queued == 1
        send()
        again = directory_reconcile()
    assert again.differences == [
        {"tenant": "genomics", "role": "lead", "username": "ghost", "where": "portal"}
    ]
    assert again.changes_queued == 0
    assert list(DirectoryChange.objects.values_list("state", flat=True)) == ["failed"]
