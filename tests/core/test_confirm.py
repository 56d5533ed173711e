"""Destructive one-click actions ask first (portal.core.confirm): a POST without the confirmation
changes nothing and writes no audit event, it answers the confirmation (a page, or a dialog for
htmx) that posts the same fields again with `confirmed=yes`; with the confirmation the action
happens once, and a second submission changes nothing more. Outsiders still get 404."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from portal.accounts.models import ApiToken, User
from portal.accounts.tokens import api_token_create
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.core.models import AuditEvent
from tenants.models import Membership, Tenant
from tenants.services import tenant_change_state

CONFIRMED = {"confirmed": "yes"}


@dataclass
class Action:
    url: str
    data: dict[str, str]
    audit: str
    done: Callable[[], bool]
    title: str


def audits(action: str) -> int:
    return AuditEvent.objects.filter(action=action).count()


def ask_then_do(client: Client, action: Action) -> None:
    """The whole contract, for one action and one person allowed to do it."""
    asked = client.post(action.url, action.data)
    assert asked.status_code == 200
    assert 'data-testid="confirm"' in asked.text
    assert action.title in asked.text
    assert 'name="confirmed" value="yes"' in asked.text
    assert f'action="{action.url}"' in asked.text
    for name, value in action.data.items():  # the confirmation posts the same fields again
        assert f'name="{name}" value="{value}"' in asked.text
    assert not action.done()
    assert audits(action.audit) == 0

    dialog = client.post(action.url, action.data, HTTP_HX_REQUEST="true")
    assert dialog.status_code == 200
    assert dialog.text.lstrip().startswith("<dialog")
    assert "data-confirm-cancel" in dialog.text
    assert "<script" not in dialog.text
    assert not action.done()
    assert audits(action.audit) == 0

    confirmed = client.post(action.url, action.data | CONFIRMED)
    again = client.post(action.url, action.data | CONFIRMED)  # a double click, a reload
    assert confirmed.status_code == 302
    assert again.status_code == 302
    assert action.done()
    assert audits(action.audit) == 1


@pytest.fixture
def allocation(developer: User, a100_tenant: Tenant, catalog: dict[str, Any]) -> GpuRequest:
    return gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )


def state_is(tenant: Tenant, state: str) -> Callable[[], bool]:
    return lambda: Tenant.objects.get(pk=tenant.pk).state == state


def test_suspend_asks_first_then_suspends_once(client_for, admin_user, tenant_a) -> None:
    ask_then_do(
        client_for(admin_user),
        Action(
            url=f"/tenants/{tenant_a.slug}/state/",
            data={"action": "suspend"},
            audit="tenant.suspend",
            done=state_is(tenant_a, "suspended"),
            title="Suspend tenant Computer Vision Lab?",
        ),
    )


def test_reactivate_asks_first_then_reactivates_once(client_for, admin_user, tenant_a) -> None:
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="suspend")
    ask_then_do(
        client_for(admin_user),
        Action(
            url=f"/tenants/{tenant_a.slug}/state/",
            data={"action": "reactivate"},
            audit="tenant.reactivate",
            done=state_is(tenant_a, "active"),
            title="Reactivate tenant Computer Vision Lab?",
        ),
    )


def test_the_reason_given_on_the_confirmation_goes_to_the_audit_log(
    client_for, admin_user, tenant_a
) -> None:
    client = client_for(admin_user)
    url = f"/tenants/{tenant_a.slug}/state/"

    asked = client.post(url, {"action": "suspend"})
    client.post(url, {"action": "suspend", "comment": "unpaid invoices"} | CONFIRMED)

    assert 'name="comment"' in asked.text
    assert AuditEvent.objects.get(action="tenant.suspend").comment == "unpaid invoices"


def test_archive_asks_to_type_the_slug_and_changes_nothing_until_it_is_typed(
    client_for, admin_user, tenant_a
) -> None:
    client = client_for(admin_user)
    url = f"/tenants/{tenant_a.slug}/state/"

    asked = client.post(url, {"action": "archive"})
    untyped = client.post(url, {"action": "archive"} | CONFIRMED)
    mistyped = client.post(url, {"action": "archive", "typed": "nlp"} | CONFIRMED)

    assert asked.status_code == 200
    assert "Type <code>vision</code> to confirm" in asked.text
    assert (untyped.status_code, mistyped.status_code) == (400, 400)
    assert "That is not vision." in mistyped.text
    assert state_is(tenant_a, "active")()
    assert audits("tenant.archive") == 0

    archived = client.post(url, {"action": "archive", "typed": " vision "} | CONFIRMED)
    again = client.post(url, {"action": "archive", "typed": "vision"} | CONFIRMED)

    assert (archived.status_code, again.status_code) == (302, 302)
    assert state_is(tenant_a, "archived")()
    assert audits("tenant.archive") == 1


def test_a_second_confirmed_suspend_says_it_is_suspended_already(
    client_for, admin_user, tenant_a
) -> None:
    client = client_for(admin_user)
    url = f"/tenants/{tenant_a.slug}/state/"

    client.post(url, {"action": "suspend"} | CONFIRMED)
    again = client.post(url, {"action": "suspend"} | CONFIRMED, follow=True)

    assert "Tenant vision is suspended already." in again.text
    assert audits("tenant.suspend") == 1


def test_member_remove_asks_first_then_removes_once(client_for, lead, developer, tenant_a) -> None:
    ask_then_do(
        client_for(lead),
        Action(
            url=f"/tenants/{tenant_a.slug}/members/{developer.username}/remove/",
            data={},
            audit="membership.remove",
            done=lambda: not Membership.objects.filter(user=developer).exists(),
            title="Remove dev from Computer Vision Lab?",
        ),
    )


def test_token_revoke_asks_first_then_revokes_once(client_for, developer) -> None:
    token = api_token_create(actor=developer, name="old laptop").token
    ask_then_do(
        client_for(developer),
        Action(
            url=f"/account/tokens/{token.pk}/revoke/",
            data={},
            audit="api_token.revoke",
            done=lambda: ApiToken.objects.get(pk=token.pk).revoked_at is not None,
            title="Revoke “old laptop”?",
        ),
    )


def test_release_asks_first_then_releases_once(client_for, developer, allocation) -> None:
    ask_then_do(
        client_for(developer),
        Action(
            url=f"/requests/{allocation.pk}/release/",
            data={},
            audit="gpu_request.release",
            done=lambda: GpuRequest.objects.get(pk=allocation.pk).state == RequestState.RELEASED,
            title=f"Release allocation {allocation.pk}?",
        ),
    )


def test_revoke_asks_first_then_revokes_once_with_its_reason(
    client_for, admin_user, allocation
) -> None:
    ask_then_do(
        client_for(admin_user),
        Action(
            url=f"/requests/{allocation.pk}/revoke/",
            data={"next": "/manage/requests/", "comment": "cluster maintenance"},
            audit="gpu_request.revoke",
            done=lambda: GpuRequest.objects.get(pk=allocation.pk).state == RequestState.REVOKED,
            title=f"Revoke allocation {allocation.pk}?",
        ),
    )
    assert AuditEvent.objects.get(action="gpu_request.revoke").comment == "cluster maintenance"


def test_the_confirmation_cancels_back_to_where_the_button_was(
    client_for, admin_user, allocation
) -> None:
    asked = client_for(admin_user).post(
        f"/requests/{allocation.pk}/revoke/", {"next": "/manage/requests/", "comment": "x"}
    )

    assert 'href="/manage/requests/" data-testid="confirm-cancel"' in asked.text


def test_extend_and_cancel_do_not_ask(client_for, developer, allocation) -> None:
    response = client_for(developer).post(f"/requests/{allocation.pk}/extend/", {"hours": "1"})

    assert response.status_code == 302
    assert audits("gpu_request.extend") == 1


def test_outsiders_get_404_with_or_without_the_confirmation(
    client_for, outsider, developer, allocation, tenant_a
) -> None:
    token = api_token_create(actor=developer, name="ci").token
    client = client_for(outsider)
    urls = [
        (f"/tenants/{tenant_a.slug}/state/", {"action": "suspend"}),
        (f"/tenants/{tenant_a.slug}/members/{developer.username}/remove/", {}),
        (f"/account/tokens/{token.pk}/revoke/", {}),
        (f"/requests/{allocation.pk}/release/", {}),
        (f"/requests/{allocation.pk}/revoke/", {"comment": "x"}),
    ]

    for url, data in urls:
        assert client.post(url, data).status_code == 404, url
        assert client.post(url, data | CONFIRMED).status_code == 404, url
    assert not AuditEvent.objects.filter(actor=outsider).exists()
    assert state_is(tenant_a, "active")()
