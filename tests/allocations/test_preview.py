"""The request preview: the form's live fragment and `POST /api/v1/requests/preview` tell the
same path and numbers, decided by the rules a submission is decided by, and write nothing."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.billing.services import rate_card_create
from portal.core.models import AuditEvent

PREVIEW_API = "/api/v1/requests/preview"


def body(**overrides):
    return {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1, **overrides}


def shown(page: str, name: str) -> str:
    match = re.search(rf'data-testid="{name}"[^>]*>(.*?)</', page, re.S)
    assert match, f"no {name} in the fragment"
    return " ".join(html.unescape(match.group(1)).split())


@pytest.fixture
def one_held(developer, a100_tenant, catalog) -> GpuRequest:
    """1 of vision's 10 A100 GPU-eq is held, so used, remaining and after differ."""
    held = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    assert held.state == RequestState.APPROVED
    return held


@pytest.mark.parametrize(
    ("overrides", "path", "after", "state"),
    [
        ({}, "approved", "8", RequestState.APPROVED),
        ({"count": 2}, "lead", "7", RequestState.PENDING),
        ({"duration_hours": 24}, "lead", "8", RequestState.PENDING),
        ({"count": 10}, "exceeds", "-1", RequestState.REJECTED),
    ],
)
def test_the_api_and_the_form_tell_the_same_path_and_numbers_as_the_decision(
    client_for, developer, one_held, overrides, path, after, state
) -> None:
    client = client_for(developer)

    answer = client.post(PREVIEW_API, body(**overrides), content_type="application/json")
    fragment = client.get(
        "/requests/preview/", {"duration_hours": "", **body(**overrides)}, HTTP_HX_REQUEST="true"
    ).text
    decided = client.post("/api/v1/requests/", body(**overrides), content_type="application/json")

    assert answer.status_code == 200
    preview = answer.json()
    assert preview["path"] == path
    assert (preview["quota"], preview["used"], preview["remaining"]) == ("10", "1", "9")
    assert preview["remaining_after"] == after
    assert preview["gpu_eq"] == str(preview["count"])
    assert preview["free_units"] is None
    # The form's fragment shows the same.
    assert f'class="path {preview["path"]}"' in fragment
    assert shown(fragment, "quota-after") == (
        f"{preview['remaining_after_display']} of 10 GPU-eq (NVIDIA A100-SXM4-80GB)"
    )
    assert shown(fragment, "request-gpu-eq") == (
        f"{preview['gpu_eq_display']} GPU-eq for {preview['duration_hours']} h"
    )
    assert shown(fragment, "decision-path").startswith(preview["message"])
    assert shown(fragment, "capacity-free") == "not read yet"
    # And the submission then decides as previewed.
    assert (decided.json().get("request") or decided.json())["state"] == state


def test_a_model_without_quota_previews_as_no_quota(client_for, developer, a100_tenant) -> None:
    client = client_for(developer)

    answer = client.post(
        PREVIEW_API, body(offering="h100-80gb-whole"), content_type="application/json"
    )
    fragment = client.get("/requests/preview/", body(offering="h100-80gb-whole")).text

    assert answer.status_code == 200
    assert answer.json()["path"] == "no-quota"
    assert answer.json()["quota"] is None
    assert answer.json()["remaining_after"] is None
    assert 'class="path no-quota"' in fragment
    assert "has no quota for this GPU model" in fragment


def test_the_preview_writes_nothing(client_for, developer, lead, one_held) -> None:
    requests, events = GpuRequest.objects.count(), AuditEvent.objects.count()

    for client in (client_for(developer), client_for(lead)):
        for count in (1, 2, 10):
            answer = client.post(PREVIEW_API, body(count=count), content_type="application/json")
            assert answer.status_code == 200
            assert client.get("/requests/preview/", body(count=count)).status_code == 200

    assert GpuRequest.objects.count() == requests
    assert AuditEvent.objects.count() == events


def test_only_leads_are_offered_to_ask_for_more_quota(
    client_for, developer, lead, a100_tenant
) -> None:
    too_much = body(count=11)

    for_lead = client_for(lead).post(PREVIEW_API, too_much, content_type="application/json")
    for_developer = client_for(developer).post(
        PREVIEW_API, too_much, content_type="application/json"
    )

    assert for_lead.json()["can_ask_quota"] is True
    assert for_developer.json()["can_ask_quota"] is False


def test_an_outsider_previews_nothing_in_another_tenant(client_for, outsider, a100_tenant) -> None:
    response = client_for(outsider).post(PREVIEW_API, body(), content_type="application/json")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"offering": "no-such-offering"}, "offering"),
        ({"count": 0}, "count"),
        ({"count": "one"}, "count"),
        ({"duration_hours": 1000}, "duration_hours"),
        ({"purpose": "mining"}, "purpose"),
        ({"tenant": ""}, "tenant"),
    ],
)
def test_bad_input_answers_400_naming_the_field(
    client_for, developer, a100_tenant, overrides, field
) -> None:
    response = client_for(developer).post(
        PREVIEW_API, body(**overrides), content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert field in response.json()["error"]["fields"]


def test_the_form_shows_why_a_preview_is_bad_input(client_for, developer, a100_tenant) -> None:
    fragment = client_for(developer).get("/requests/preview/", body(count=0)).text

    assert shown(fragment, "preview-error") == "count: Ask for at least 1."


def test_the_preview_answers_in_bounded_queries(
    client_for, developer, one_held, django_assert_max_num_queries
) -> None:
    client = client_for(developer)

    with django_assert_max_num_queries(10):  # one of them: whether a GPU pool serves it
        answer = client.post(PREVIEW_API, body(count=2), content_type="application/json")

    assert answer.status_code == 200


def test_the_preview_shows_the_price_at_todays_rate_card(
    client_for, developer, finance_user, a100_tenant, catalog
) -> None:
    client = client_for(developer)
    mig = {"offering": "a100-80gb-mig-1g-10gb", "count": 2, "duration_hours": 8}
    unpriced = client.post(PREVIEW_API, body(**mig), content_type="application/json").json()
    assert unpriced["price"] is None
    model = catalog["a100-80gb-whole"].gpu_model
    today = timezone.now().date()
    rate_card_create(
        actor=finance_user, gpu_model=model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="2.80", effective_from=today - timedelta(days=30),
    )  # fmt: skip
    rate_card_create(
        actor=finance_user, gpu_model=model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="9.99", effective_from=today + timedelta(days=1),
    )  # fmt: skip

    priced = client.post(PREVIEW_API, body(**mig), content_type="application/json").json()
    fragment = client.get("/requests/preview/", body(**mig), HTTP_HX_REQUEST="true").text

    # 2 x 1/7 GPU-eq at 2.80 EUR: 0.80 EUR an hour, 6.40 EUR for 8 hours (today's card).
    assert priced["price"] == {"currency": "EUR", "per_hour": "0.80", "total": "6.40", "hours": 8}
    assert shown(fragment, "price") == "0.80 EUR per hour, 6.40 EUR for 8 h"
