"""An admin adds a member while Keycloak is down: the portal keeps working, the directory page
shows the change waiting with Keycloak's 503, and once Keycloak is back a reconcile delivers it.
A real Celery worker sends the changes to the Keycloak double."""

import pytest
from django.test import override_settings
from playwright.sync_api import Page, expect

from portal.accounts.services import user_create
from portal.directory.models import DirectoryChange
from tenants.services import tenant_create
from tests.conftest import wait_until
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser

LEADS = "/gpu-portal/tenants/genomics/leads"


def test_a_change_made_during_an_outage_waits_and_is_delivered_after(
    keycloak_api, live_server, page: Page, admin_user, celery_worker
) -> None:
    with override_settings(PORTAL_MEMBERSHIP_SOURCE="portal"):
        tenant_create(actor=admin_user, slug="genomics", name="Genomics Lab")
        wait_until(lambda: LEADS in keycloak_api.group_paths(), what="the tenant's groups")
        user_create(actor=None, username="rhea", first_name="Rhea", last_name="Lead")
        keycloak_api.add_user("rhea")
        keycloak_api.outage = True

        sign_in(page, live_server.url, "admin")
        page.goto(f"{live_server.url}/tenants/genomics/")
        members = page.locator("#members")
        members.get_by_label("Username").fill("rhea")
        members.get_by_label("Role").select_option("lead")
        members.get_by_role("button", name="Add or change member").click()
        expect(page.get_by_test_id("member-rhea")).to_contain_text("lead")

        change = wait_until(
            lambda: DirectoryChange.objects.filter(username="rhea", attempts__gte=1).first(),
            what="the worker to try sending the change",
        )
        page.goto(f"{live_server.url}/manage/directory/")
        row = page.get_by_test_id(f"change-{change.pk}")
        expect(row).to_contain_text("rhea")
        expect(row).to_contain_text("pending")
        expect(row.get_by_test_id("change-error")).to_contain_text("503")
        expect(page.get_by_test_id("count-pending")).to_have_text("1")
        assert keycloak_api.group_members(LEADS) == set()

        keycloak_api.outage = False
        page.get_by_role("button", name="Reconcile now").click()
        expect(page.get_by_role("status")).to_contain_text("reconcile with Keycloak is queued")
        # The page polls until the change is sent and the reconcile's report is in.
        expect(page.get_by_test_id("count-pending")).to_have_text("0", timeout=20_000)
        expect(row).to_have_count(0)
        expect(page.locator("[data-testid^=report-]").first).to_be_visible(timeout=20_000)
        expect(page.get_by_test_id("awaiting-report")).to_have_count(0)
        assert keycloak_api.group_members(LEADS) == {"rhea"}
        change.refresh_from_db()
        assert change.state == "sent"
