"""The workloads app's panel on the homes (portal.core.home): a member's own notebooks with the
time their allocations have left, and "launch again" with a recent notebook's settings."""

from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Q, Window
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.home import HOME_ROWS, home_register
from portal.core.pagination import first_with_count
from portal.workloads.models import Notebook, NotebookState
from portal.workloads.selectors import notebooks_for

# How many of the user's latest notebooks "launch again" looks through for different setups.
RECENT_NOTEBOOKS = 20


def launch_again_url(notebook: Notebook) -> str:
    """The launch form, filled in with `notebook`'s GPUs, image and sizes (new GPUs are
    requested with the launch; the form checks it all again)."""
    allocation = notebook.allocation
    values = {
        "tenant": notebook.tenant.slug,
        "offering": allocation.offering.slug,
        "count": allocation.count,
        "duration_hours": allocation.duration_hours,
        "image": notebook.image.slug,
        "cpu_cores": notebook.cpu_cores,
        "memory_gib": notebook.memory_gib,
        "workspace_gib": notebook.workspace_gib,
    }
    return f"{reverse('workloads:new')}?{urlencode(values)}"


def my_notebooks_context(user: User) -> dict[str, Any]:
    """The user's own notebooks that are not deleted, newest first, and their latest different
    setups to launch again. One query: the latest RECENT_NOTEBOOKS with how many are not
    deleted, which hold the panel's rows unless deleted ones crowd them out (then a second)."""
    mine = notebooks_for(user).filter(owner=user)
    order = ("-created_at", "-id")
    # What the rows and "launch again" show and fill in (not the list's prefetches).
    latest: list[Notebook] = list(
        mine.select_related(None)
        .select_related("tenant", "allocation__offering", "image")
        .prefetch_related(None)
        .annotate(current_in_all=Window(Count("pk", filter=~Q(state=NotebookState.DELETED))))
        .order_by(*order)[:RECENT_NOTEBOOKS]
    )
    count: int = latest[0].current_in_all if latest else 0  # type: ignore[attr-defined]
    rows = [notebook for notebook in latest if notebook.state != NotebookState.DELETED]
    if len(rows) < min(HOME_ROWS, count):
        rows, count = first_with_count(
            mine.exclude(state=NotebookState.DELETED).order_by(*order), HOME_ROWS
        )
    again: list[tuple[Notebook, str]] = []
    seen: set[tuple[object, ...]] = set()
    for notebook in latest:
        setup = (
            notebook.tenant_id,
            notebook.allocation.offering_id,
            notebook.allocation.count,
            notebook.image_id,
        )
        if setup in seen or len(again) == 3:
            continue
        seen.add(setup)
        again.append((notebook, launch_again_url(notebook)))
    return {
        "notebooks": rows[:HOME_ROWS],
        "notebook_count": count,
        "launch_again": again,
        "now": timezone.now(),
    }


def workloads_home_register() -> None:
    home_register(
        "my-notebooks",
        {"developer", "lead"},
        position=15,
        title=_("My notebooks"),
        template="workloads/_home_notebooks.html",
        context=my_notebooks_context,
    )
