"""The in-process side of `make bench`'s read scenarios, run once per benchmark against the
seeded database: `python -m tests.bench.probe OUT.json` (DATABASE_URL naming that database).

1. Signs the personas in through the project's own code: a personal API token each
   (`api_token_create`) and a browser session each (Django's `login`, as the sign-in page does).
2. Lists the scenarios, with the deep pages that this data set has. A deep page is read as a
   client that followed the `next` links gets it: by the cursor of the row before it.
3. Calls each scenario once through Django's test client to warm up, then again under
   `CaptureQueriesContext`: the status, the number of SQL queries and their time, and the
   slowest query with its `EXPLAIN (ANALYZE, BUFFERS)`.
4. Times each persona's Home panels one at a time (what each costs of the Home).
Writes all of it as JSON to OUT.json for the benchmark (tests/bench/bench_portal_reads.py).
"""

import json
import math
import os
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Scenario:
    name: str
    persona: str  # "admin", "lead", "developer", "finance", or "" for no credentials
    # "api" (token), "page" (session cookie), "panel" (session cookie, as htmx asks: a Home's
    # panel, a tenant page's section), "health" (none)
    kind: str
    path: str
    # What a deep page is compared with for a constant number of queries (its page 1).
    first_page_of: str = ""


PAGE_SIZE = 50
# The sections a lead's tenant page loads on its own (tenants/views.py).
TENANT_SECTIONS = ("provisioning", "budget", "quotas", "members", "quota-requests")
CHARGEBACK_SECTIONS = ("centre-totals", "spend")  # what the Chargeback page loads after it
DEEPEST = 2000  # the deepest page looked at, as the table did


def _deep_page(rows: Any) -> tuple[int, str]:
    """The deepest page of `rows` looked at (at most DEEPEST), and the query string that reads
    it as its previous page's next link does: the cursor of that page's last row."""
    from portal.core.pagination import cursor_after  # noqa: PLC0415

    page = max(2, min(DEEPEST, math.ceil(rows.count() / PAGE_SIZE)))
    before = rows[(page - 1) * PAGE_SIZE - 1]
    return page, f"cursor={cursor_after(rows, before)}"


def scenarios(
    personas: dict[str, Any],
    deep: dict[str, tuple[int, str]],
    tenant: str,
    request_id: int,
    closed_month: str,
    year_ago: str,
    home_panel_names: dict[str, list[str]],
) -> list[Scenario]:
    rows = [Scenario("/healthz", "", "health", "/healthz")]
    for persona in ("admin", "lead", "developer"):
        first = f"API requests/ {persona} p1"
        page, cursor = deep[f"requests {persona}"]
        rows += [
            Scenario(first, persona, "api", "/api/v1/requests/"),
            Scenario(
                f"API requests/ {persona} p{page}",
                persona,
                "api",
                f"/api/v1/requests/?{cursor}",
                first_page_of=first,
            ),
        ]
    page, cursor = deep["audit admin"]
    rows += [
        Scenario("API audit-events/ admin p1", "admin", "api", "/api/v1/audit-events/"),
        Scenario(
            f"API audit-events/ admin p{page}",
            "admin",
            "api",
            f"/api/v1/audit-events/?{cursor}",
            first_page_of="API audit-events/ admin p1",
        ),
        Scenario("API tenants/ admin", "admin", "api", "/api/v1/tenants/"),
        Scenario(f"API tenants/{tenant}/ lead", "lead", "api", f"/api/v1/tenants/{tenant}/"),
        Scenario(
            "API requests/{id}/ developer", "developer", "api", f"/api/v1/requests/{request_id}/"
        ),
        Scenario("API extensions/ lead", "lead", "api", "/api/v1/extensions/"),
        Scenario("API offerings/ developer", "developer", "api", "/api/v1/offerings/"),
        Scenario("API notebooks/ admin", "admin", "api", "/api/v1/notebooks/"),
        Scenario("API notebooks/ developer", "developer", "api", "/api/v1/notebooks/"),
        Scenario("API me developer", "developer", "api", "/api/v1/me"),
        *[
            Scenario(f"page Home ({persona})", persona, "page", "/home/")
            for persona in ("admin", "lead", "developer")
        ],
        # What each Home loads after it, a panel at a time: the admin's and the lead's (a
        # developer's four are the lead's last four, the same code on their own rows).
        *[
            Scenario(f"panel {name} ({persona})", persona, "panel", f"/home/panels/{name}/")
            for persona, names in home_panel_names.items()
            for name in names
        ],
        Scenario("page My requests (developer)", "developer", "page", "/requests/"),
        Scenario("page Notebooks (developer)", "developer", "page", "/notebooks/"),
        Scenario("page All requests (admin)", "admin", "page", "/manage/requests/"),
        Scenario("page Approvals (lead)", "lead", "page", "/approvals/"),
        # The extensions waiting, which the Approvals page loads after it.
        Scenario("section Approvals extensions (lead)", "lead", "panel", "/approvals/extensions/"),
        Scenario("page Tenants (admin)", "admin", "page", "/manage/tenants/"),
        Scenario(f"page tenant {tenant} (lead)", "lead", "page", f"/tenants/{tenant}/"),
        # What a tenant's page loads after it, a section at a time (as htmx asks).
        *[
            Scenario(
                f"section {name} {tenant} (lead)",
                "lead",
                "panel",
                f"/tenants/{tenant}/sections/{name}/",
            )
            for name in TENANT_SECTIONS
        ],
        Scenario("page Audit log (admin)", "admin", "page", "/audit/"),
        # A closed month: a final statement for every tenant (1,000 at scale 1.0).
        Scenario(
            f"API statements/ finance {closed_month}",
            "finance",
            "api",
            f"/api/v1/statements/?period={closed_month}",
        ),
        Scenario(
            f"API statement lines finance {closed_month}",
            "finance",
            "api",
            f"/api/v1/statements/{closed_month}-{tenant}/lines/",
        ),
        Scenario(
            f"page Chargeback (finance) {closed_month}",
            "finance",
            "page",
            f"/chargeback/?period={closed_month}",
        ),
        *[
            Scenario(
                f"section {name} (finance) {closed_month}",
                "finance",
                "panel",
                f"/chargeback/sections/{name}/?period={closed_month}&sort=tenant",
            )
            for name in CHARGEBACK_SECTIONS
        ],
        # The open month so far (the page's default): every tenant's provisional total, read
        # as stored once priced (the first reading prices them), and its spend chart.
        Scenario("API statements/ finance this month", "finance", "api", "/api/v1/statements/"),
        Scenario("page Chargeback (finance) this month", "finance", "page", "/chargeback/"),
        *[
            Scenario(
                f"section {name} (finance) this month",
                "finance",
                "panel",
                f"/chargeback/sections/{name}/?sort=tenant",
            )
            for name in CHARGEBACK_SECTIONS
        ],
        # Usage: the default fortnight from the daily rollup (finance, a lead's tenant) and
        # from the hourly records (a developer's own); a year of every tenant by GPU model.
        Scenario("API usage/ finance", "finance", "api", "/api/v1/usage/"),
        Scenario(
            "API usage/ finance a year by tenant and model",
            "finance",
            "api",
            f"/api/v1/usage/?from={year_ago}&group_by=tenant,model",
        ),
        Scenario(f"API usage/ lead {tenant}", "lead", "api", f"/api/v1/usage/?tenant={tenant}"),
        Scenario("API usage/ developer", "developer", "api", "/api/v1/usage/"),
        Scenario("page My usage (developer)", "developer", "page", "/usage/"),
        Scenario("page All usage (finance)", "finance", "page", "/usage/all/"),
        Scenario(f"page usage {tenant} (lead)", "lead", "page", f"/usage/tenants/{tenant}/"),
        Scenario(
            f"section idle {tenant} (lead)", "lead", "panel", f"/usage/tenants/{tenant}/idle/"
        ),
    ]
    return rows


def _sign_in(user: Any) -> dict[str, str]:
    from django.conf import settings  # noqa: PLC0415
    from django.test import Client  # noqa: PLC0415

    from portal.accounts.tokens import api_token_create  # noqa: PLC0415

    issued = api_token_create(actor=user, name="make bench", expires_in_days=1)
    client = Client()
    client.force_login(user)
    return {
        "username": user.username,
        "token": issued.text,
        "session": client.cookies[settings.SESSION_COOKIE_NAME].value,
    }


def _plan(sql: str) -> list[str]:
    from django.db import connection  # noqa: PLC0415

    try:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            return [row[0] for row in cursor.fetchall()]
    except Exception as error:  # noqa: BLE001  (a plan is evidence, not a result)
        return [f"EXPLAIN failed: {error}"]


def _call(scenario: Scenario, personas: dict[str, Any]) -> dict[str, Any]:
    from django.conf import settings  # noqa: PLC0415
    from django.db import connection  # noqa: PLC0415
    from django.test import Client  # noqa: PLC0415
    from django.test.utils import CaptureQueriesContext  # noqa: PLC0415

    client = Client()
    headers: dict[str, str] = {}
    if scenario.kind == "api":
        headers["Authorization"] = f"Bearer {personas[scenario.persona]['token']}"
    elif scenario.kind in ("page", "panel"):
        if scenario.kind == "panel":
            headers["HX-Request"] = "true"
        client.cookies[settings.SESSION_COOKIE_NAME] = personas[scenario.persona]["session"]
    client.get(scenario.path, headers=headers)  # warm: first-call caches are not the point
    with CaptureQueriesContext(connection) as captured:
        response = client.get(scenario.path, headers=headers)
    queries = [(float(query["time"]) * 1000, query["sql"]) for query in captured.captured_queries]
    slowest_ms, slowest_sql = max(queries, default=(0.0, ""))
    return {
        "status": response.status_code,
        "queries": len(queries),
        "sql_ms": round(sum(ms for ms, _sql in queries), 2),
        "slowest_ms": round(slowest_ms, 2),
        "slowest_sql": slowest_sql,
        "plan": _plan(slowest_sql) if slowest_ms >= 5 else [],
    }


# How often each Home panel is timed in-process (the median is kept).
PANEL_CALLS = 30


def _home_panels(users: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each persona's Home panels, one at a time in-process: the median ms of reading a
    panel's context and of rendering its template, and its queries. What a Home costs is
    their sum; the table shows each panel beside the list pages it summarises."""
    import statistics  # noqa: PLC0415
    import time  # noqa: PLC0415

    from django.db import connection  # noqa: PLC0415
    from django.template.loader import render_to_string  # noqa: PLC0415
    from django.test import RequestFactory  # noqa: PLC0415
    from django.test.utils import CaptureQueriesContext  # noqa: PLC0415

    from portal.core.home import panels_for  # noqa: PLC0415
    from portal.core.navigation import persona_of  # noqa: PLC0415

    found: dict[str, list[dict[str, Any]]] = {}
    for role in ("admin", "lead", "developer"):
        user = users[role]
        request = RequestFactory().get("/home/")
        request.user = user
        rows = []
        for panel in panels_for(persona_of(user)):
            render_to_string(panel.template, panel.context(user), request)  # warm
            reads, renders = [], []
            for _ in range(PANEL_CALLS):
                began = time.perf_counter()
                context = panel.context(user)
                read = time.perf_counter()
                render_to_string(panel.template, context, request)
                reads.append((read - began) * 1000)
                renders.append((time.perf_counter() - read) * 1000)
            with CaptureQueriesContext(connection) as captured:
                panel.context(user)
            rows.append(
                {
                    "panel": panel.name,
                    "read_ms": round(statistics.median(reads), 2),
                    "render_ms": round(statistics.median(renders), 2),
                    "queries": len(captured.captured_queries),
                }
            )
        found[role] = rows
    return found


def main(out: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django  # noqa: PLC0415

    django.setup()
    from django.test.utils import setup_test_environment  # noqa: PLC0415

    from portal.accounts.models import User  # noqa: PLC0415
    from portal.allocations.selectors import gpu_requests_for  # noqa: PLC0415
    from portal.billing.models import Period, PeriodState  # noqa: PLC0415
    from portal.core.home import panels_for  # noqa: PLC0415
    from portal.core.navigation import persona_of  # noqa: PLC0415
    from portal.core.selectors import audit_events_for  # noqa: PLC0415
    from tests.bench import scale  # noqa: PLC0415

    setup_test_environment()  # the test client's host, as in the tests
    shape = scale.Shape.at(scale.bench_scale())
    users = {
        "admin": User.objects.get(username=scale.ADMIN),
        "lead": User.objects.get(username=scale.lead_username()),
        "developer": User.objects.get(username=scale.developer_username(shape)),
        "finance": User.objects.get(username=scale.FINANCE),
    }
    personas = {role: _sign_in(user) for role, user in users.items()}
    deep = {
        f"requests {role}": _deep_page(gpu_requests_for(users[role]))
        for role in ("admin", "lead", "developer")
    }
    deep["audit admin"] = _deep_page(audit_events_for(users["admin"]))
    newest = gpu_requests_for(users["developer"]).first()
    assert newest is not None, "the developer has no requests in this data set"
    closed = Period.objects.filter(state=PeriodState.CLOSED).order_by("-month").first()
    assert closed is not None, "this data set has no closed month"
    year_ago = (datetime.now(UTC).date() - timedelta(days=365)).isoformat()
    panel_names = {
        role: [panel.name for panel in panels_for(persona_of(users[role]))]
        for role in ("admin", "lead")
    }
    listed = scenarios(
        personas,
        deep,
        scale.tenant_slug(0),
        newest.pk,
        f"{closed.month:%Y-%m}",
        year_ago,
        panel_names,
    )
    calls = {scenario.name: _call(scenario, personas) for scenario in listed}
    result = {
        "closed_month": f"{closed.month:%Y-%m}",
        "personas": personas,
        "scenarios": [asdict(scenario) for scenario in listed],
        "calls": calls,
        "home_panels": _home_panels(users),
    }
    with open(out, "w", encoding="utf-8") as file:  # noqa: PTH123
        json.dump(result, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
