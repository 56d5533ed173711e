"""The allocations app's panels on the homes (portal.core.home): a member's own requests and
allocations with the time they have left and "request again", and a lead's pending approvals
with the quota left beside each."""

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.allocations.selectors import (
    approvals_queue_for,
    extensions_queue_for,
    gpu_requests_of,
)
from portal.core.home import HOME_ROWS, home_register
from portal.core.pagination import first_with_count
from tenants.selectors import quota_lines_for

# How many of the user's latest requests "request again" looks through for different asks.
RECENT_REQUESTS = 20


def request_again_url(gpu_request: GpuRequest) -> str:
    """The request form, filled in as `gpu_request` was (the form checks it all again)."""
    values = {
        "tenant": gpu_request.tenant.slug,
        "offering": gpu_request.offering.slug,
        "count": gpu_request.count,
        "duration_hours": gpu_request.duration_hours,
        "purpose": gpu_request.purpose,
    }
    return f"{reverse('allocations:new')}?{urlencode(values)}"


def my_allocations_context(user: User) -> dict[str, Any]:
    """The user's own pending requests and allocations, ending soonest first, and their latest
    different asks to make again. Four queries."""
    mine = gpu_requests_of(user)
    current = mine.filter(state__in=(RequestState.PENDING, *HOLDING_STATES))
    rows, count = first_with_count(current.order_by("ends_at", "created_at", "id"), HOME_ROWS)
    again: list[tuple[GpuRequest, str]] = []
    seen: set[tuple[object, ...]] = set()
    # What "request again" shows and fills in, in one query (not the list's prefetches).
    recent = mine.select_related(None).select_related("tenant", "offering").prefetch_related(None)
    for gpu_request in recent.order_by("-created_at", "-id")[:RECENT_REQUESTS]:
        ask = (gpu_request.tenant_id, gpu_request.offering_id, gpu_request.count)
        if ask in seen or len(again) == 3:
            continue
        seen.add(ask)
        again.append((gpu_request, request_again_url(gpu_request)))
    return {
        "allocations": rows,
        "allocation_count": count,
        "request_again": again,
        "now": timezone.now(),
    }


@dataclass(frozen=True)
class PendingItem:
    """Something waiting for a lead's decision, with the quota left of its GPU model."""

    kind: str  # "request" or "extension"
    gpu_request: GpuRequest
    quota: Fraction | None  # None: the tenant has no quota for the model
    remaining: Fraction | None


# What waits for a lead: each source gives (how many in all, the oldest HOME_ROWS) for a user;
# their rows show in one panel, each with the quota left of its model.
PendingSource = Callable[[User], tuple[int, list[GpuRequest]]]


def pending_requests(user: User) -> tuple[int, list[GpuRequest]]:
    rows, count = first_with_count(approvals_queue_for(user), HOME_ROWS)
    return count, rows


def pending_extensions(user: User) -> tuple[int, list[GpuRequest]]:
    """Extensions waiting for a lead, as their allocations (`.pending_extension` set)."""
    queue = extensions_queue_for(user)  # with its requests' tenants, requesters and offerings
    extensions, count = first_with_count(queue, HOME_ROWS)
    rows = []
    for extension in extensions:
        gpu_request = extension.request
        gpu_request.pending_extension = extension  # type: ignore[attr-defined]
        rows.append(gpu_request)
    return count, rows


pending_sources: dict[str, PendingSource] = {
    "request": pending_requests,
    "extension": pending_extensions,
}


def approvals_context(user: User) -> dict[str, Any]:
    """The oldest pending decisions, each with the quota left of its model in its tenant.
    One query per pending source, two for the quotas."""
    counts: dict[str, int] = {}
    found: list[tuple[str, GpuRequest]] = []
    for kind, source in pending_sources.items():
        counts[kind], rows = source(user)
        found += [(kind, row) for row in rows]
    lines = quota_lines_for({gpu_request.tenant_id for _, gpu_request in found})
    by_model = {
        (tenant_id, line.gpu_model.pk): line for tenant_id, rows in lines.items() for line in rows
    }
    items = []
    for kind, gpu_request in found:
        line = by_model.get((gpu_request.tenant_id, gpu_request.gpu_model_id))
        items.append(
            PendingItem(
                kind,
                gpu_request,
                line.quota if line else None,
                line.remaining if line else None,
            )
        )
    return {"pending": items, "pending_count": sum(counts.values()), "pending_counts": counts}


def allocations_home_register() -> None:
    home_register(
        "approvals",
        {"lead"},
        position=10,
        title=_("Waiting for your approval"),
        template="allocations/_home_approvals.html",
        context=approvals_context,
    )
    home_register(
        "my-allocations",
        {"developer", "lead"},
        position=20,
        title=_("My allocations"),
        template="allocations/_home_allocations.html",
        context=my_allocations_context,
    )
