"""The usage pages: who sees which, the period asked for, the CSV, the watermark, and releasing
an idle allocation. Usage is made by the real collection code from a metrics source double."""

import csv
import io
import json
import re
from datetime import date, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest
from django.template import engines
from django.urls import reverse
from django.utils import translation
from django.utils.safestring import mark_safe

from portal.allocations.models import RequestState
from portal.core.models import AuditEvent
from portal.metering.models import MeteringState
from portal.metering.selectors import UsageQuery, usage_totals
from portal.metering.views import PAGE_ROWS, Table
from tests.loaded import page_loaded
from tests.metering.usage_data import Scenario, metered_cluster, scenario, tables_of
from tests.workloads.conftest import gpu_tenant  # noqa: F401  (a fixture)

WHOLE = "a100-80gb-whole"
CONFIRMED = {"confirmed": "yes"}  # what the confirmation form adds (portal.core.confirm)


@pytest.fixture
def usage(gpu_tenant, developer, lead, catalog) -> Scenario:  # noqa: F811
    return scenario(tenant=gpu_tenant, developer=developer, lead=lead, offering=catalog[WHOLE])


def rows_by(table: list[list[str]], column: str) -> dict[str, dict[str, str]]:
    header, *rows = table
    at = header.index(column)
    return {row[at]: dict(zip(header, row, strict=True)) for row in rows}


def page(client, name: str, params: dict[str, str], *args: str):
    return client.get(reverse(f"metering:{name}", args=args), params)


def loaded(client, name: str, params: dict[str, str], *args: str) -> str:
    """The page as the browser shows it once htmx loaded its sections (a tenant's idle
    allocations)."""
    return page_loaded(client, f"{reverse(f'metering:{name}', args=args)}?{urlencode(params)}")


# Each persona


def test_my_usage_shows_reserved_and_used_per_day_and_per_notebook(
    client_for, developer, usage
) -> None:
    response = page(client_for(developer), "mine", usage.params)
    assert response.status_code == 200
    tables = tables_of(response.content.decode())
    workloads = rows_by(tables["workloads"], "Notebook or allocation")
    notebook = workloads[usage.notebook.name]
    assert notebook["Used GPU-h"] == "1.000"
    assert notebook["Requested GPU-eq-h"] == "1.000"
    # Reserved: the whole next hour and the rest of this one, from the ledger.
    assert "1.000" < notebook["Reserved GPU-eq-h"] <= "2.000"
    # Nobody else's usage: the training pods and the lead's allocation are not mine.
    assert not any(name.startswith("train-") for name in workloads)
    assert f"allocation-{usage.idle.pk}" not in workloads
    daily = rows_by(tables["daily"], "Day")
    day = (usage.now_hour + timedelta(hours=1)).date().isoformat()
    assert daily[day]["Used GPU-h"] == "1.000"
    # Every day of the period, used or not.
    first, last = (date.fromisoformat(usage.params[name]) for name in ("from", "to"))
    assert len(daily) == (last - first).days + 1


def test_the_lead_sees_the_tenant_per_model_member_workload_and_its_idle_allocation(
    client_for, lead, usage
) -> None:
    html = loaded(client_for(lead), "tenant", usage.params, "vision")
    tables = tables_of(html)
    workloads = rows_by(tables["workloads"], "Workload")
    assert workloads["train-0"]["Requested GPU-eq-h"] == "3.000"
    assert workloads["train-0"]["Used GPU-h"] == "1.500"
    assert workloads[usage.notebook.name]["Used GPU-h"] == "1.000"
    members = rows_by(tables["members"], "Member")
    assert members["dev"]["Used GPU-h"] == "1.000"
    assert members["lead"]["Used GPU-h"] == "0.000"
    header, *per_model = tables["models"]
    assert header[:2] == ["Day", "GPU model"]
    assert sum(float(row[header.index("Used GPU-h")]) for row in per_model) == pytest.approx(2.5)
    # The idle allocation, with a release button; the busy one is not idle.
    assert f'data-testid="idle-{usage.idle.pk}"' in html
    assert f'data-testid="idle-{usage.busy.pk}"' not in html
    assert reverse("metering:idle-release", args=["vision", usage.idle.pk]) in html


def test_finance_sees_every_tenant_and_unattributed_usage_but_no_gpu_health(
    client_for, finance_user, usage
) -> None:
    response = page(client_for(finance_user), "all", usage.params)
    assert response.status_code == 200
    tables = tables_of(response.content.decode())
    assert {row[0] for row in tables["tenants"][1:]} == {"vision"}
    header, *unattributed = tables["unattributed"]
    used = [float(row[header.index("Used GPU-h")]) for row in unattributed]
    assert {row[0] for row in unattributed} == {"ml-shared"}
    assert sum(used) == pytest.approx(1.0)
    assert "health" not in tables
    # Finance reads the tenant's page too, without a release button.
    tenant_page = loaded(client_for(finance_user), "tenant", usage.params, "vision")
    assert f'data-testid="idle-{usage.idle.pk}"' in tenant_page
    assert "metering:idle-release" not in tenant_page
    assert ">Release</button>" not in tenant_page


def test_admins_also_see_gpu_health_per_node(client_for, admin_user, usage) -> None:
    response = page(client_for(admin_user), "all", usage.params)
    health = rows_by(tables_of(response.content.decode())["health"], "GPU")
    assert health["GPU-BAD"]["Node"] == "gpu-node-2"
    assert health["GPU-BAD"]["Last XID"] == "79"


def test_the_models_table_names_the_pools_of_each_model(client_for, admin_user, usage) -> None:
    response = page(client_for(admin_user), "all", usage.params)
    models = tables_of(response.content.decode())["models"]
    assert models[0][:2] == ["GPU model", "Pools"]
    assert "not per pool" in response.content.decode()


# Who may not


def test_developers_and_outsiders_get_404_on_the_tenant_page_and_the_all_page(
    client_for, developer, outsider, usage
) -> None:
    release = reverse("metering:idle-release", args=["vision", usage.idle.pk])
    for person in (developer, outsider):
        client = client_for(person)
        assert page(client, "tenant", usage.params, "vision").status_code == 404
        assert page(client, "all", usage.params).status_code == 404
        assert client.get(reverse("metering:all"), {"format": "csv"}).status_code == 404
        assert client.post(release).status_code == 404
    assert page(client_for(outsider), "tenant", usage.params, "nope").status_code == 404
    assert page(client_for(developer), "all", {"format": "csv"}).status_code == 404
    usage.idle.refresh_from_db()
    assert usage.idle.state == RequestState.APPROVED


def test_an_outsiders_usage_page_shows_none_of_the_tenants_usage(
    client_for, outsider, usage
) -> None:
    response = page(client_for(outsider), "mine", usage.params)
    assert response.status_code == 200
    tables = tables_of(response.content.decode())
    assert "No usage in this period." in tables["workloads"][1][0]
    assert all(row[1:] == ["0.000", "0.000"] for row in tables["daily"][1:])


def test_a_lead_cannot_release_another_tenants_allocation_through_their_own_tenant(
    client_for, lead, outsider, tenant_b, usage
) -> None:
    release = reverse("metering:idle-release", args=["nlp", usage.idle.pk])
    assert client_for(lead).post(release).status_code == 404


def test_finance_may_not_release(client_for, finance_user, usage) -> None:
    release = reverse("metering:idle-release", args=["vision", usage.idle.pk])
    assert client_for(finance_user).post(release).status_code == 403
    assert client_for(finance_user).post(release, CONFIRMED).status_code == 403
    usage.idle.refresh_from_db()
    assert usage.idle.state == RequestState.APPROVED


# The period asked for


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"from": "yesterday"}, "From", "Enter a valid date."),
        ({"from": "2025-03-10", "to": "2025-03-01"}, "To", "The end date is before the start"),
        ({"from": "2023-01-01", "to": "2025-01-01"}, "To", "at most 366 days"),
        ({"hours": "0"}, "Idle over the last (hours)", "greater than or equal to 1"),
    ],
)
def test_a_bad_period_is_shown_beside_its_field_not_a_500(
    client_for, lead, usage, params, field, message
) -> None:
    response = page(client_for(lead), "tenant", params, "vision")
    assert response.status_code == 400
    errors = re.findall(r'<p class="field-error" role="alert">(.*?)</p>', response.content.decode())
    assert any(error.startswith(f"{field}:") and message in error for error in errors), errors
    csv_response = page(client_for(lead), "tenant", params | {"format": "csv"}, "vision")
    assert csv_response.status_code == 400


def test_the_period_defaults_to_the_last_14_days(client_for, developer, usage) -> None:
    response = page(client_for(developer), "mine", {})
    daily = tables_of(response.content.decode())["daily"][1:]
    assert len(daily) == 14
    assert daily[-1][0] == usage.now_hour.date().isoformat()


# CSV and chart data: the same numbers as the table


@pytest.mark.parametrize(
    ("person", "name", "args", "table"),
    [
        ("developer", "mine", [], "daily"),
        ("developer", "mine", [], "workloads"),
        ("lead", "tenant", ["vision"], "models"),
        ("lead", "tenant", ["vision"], "members"),
        ("lead", "tenant", ["vision"], "workloads"),
        ("admin_user", "all", [], "tenants"),
        ("admin_user", "all", [], "unattributed"),
        ("admin_user", "all", [], "health"),
    ],
)
def test_the_csv_download_has_the_numbers_of_the_table(
    request, client_for, usage, person, name, args, table
) -> None:
    client = client_for(request.getfixturevalue(person))
    shown = tables_of(page(client, name, usage.params, *args).content.decode())[table]
    response = page(client, name, usage.params | {"format": "csv", "table": table}, *args)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    downloaded = list(csv.reader(io.StringIO(response.getvalue().decode())))
    assert [[cell or "" for cell in row] for row in downloaded] == shown
    assert len(downloaded) > 1


def test_the_chart_data_are_the_rows_of_its_table(client_for, lead, usage) -> None:
    response = page(client_for(lead), "tenant", usage.params, "vision")
    html = response.content.decode()
    found = re.search(r'<script id="usage-data" type="application/json">(.*?)</script>', html)
    assert found, "no json_script data"
    data = json.loads(found.group(1))
    (models,) = data["tables"]
    assert models["chart"] == {
        "x": "day",
        "series": ["reserved", "requested", "used"],
        "split": "model",
    }
    assert [models["labels"], *models["rows"]] == tables_of(html)["models"]
    assert 'data-chart="models"' in html
    assert "<script>" not in html  # no inline script: the CSP forbids it


def test_the_table_agrees_with_the_selector(client_for, lead, usage) -> None:
    response = page(client_for(lead), "tenant", usage.params, "vision")
    members = rows_by(tables_of(response.content.decode())["members"], "Member")
    query = UsageQuery(
        start=(usage.now_hour - timedelta(days=3)).date(),
        end=(usage.now_hour + timedelta(hours=1)).date(),
        group_by=("user",),
        tenant=usage.busy.tenant,
    )
    for row in usage_totals(lead, query):
        name = row.group["user"] or "(pods not started by the portal)"
        assert members[name]["Used GPU-h"] == f"{row.used_gpu_hours:.3f}"


# Releasing an idle allocation


def test_a_lead_releases_an_idle_allocation_from_the_usage_page(client_for, lead, usage) -> None:
    client = client_for(lead)
    release = reverse("metering:idle-release", args=["vision", usage.idle.pk])
    asked = client.post(f"{release}?hours=24", HTTP_HX_REQUEST="true")
    assert asked.content.decode().lstrip().startswith("<dialog")
    assert f"Release allocation {usage.idle.pk}?" in asked.content.decode()
    usage.idle.refresh_from_db()
    assert usage.idle.state == RequestState.APPROVED
    response = client.post(f"{release}?hours=24", CONFIRMED, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Allocation {usage.idle.pk} is released." in html
    assert f'data-testid="idle-{usage.idle.pk}"' not in html
    usage.idle.refresh_from_db()
    assert usage.idle.state == RequestState.RELEASED
    event = AuditEvent.objects.get(action="gpu_request.release", target_id=str(usage.idle.pk))
    assert event.actor == lead
    assert event.changes["state"] == ["approved", "released"]
    # Again (a second submission): it was released once, and says so.
    again = client.post(release, CONFIRMED, follow=True)
    assert f"Allocation {usage.idle.pk} is released already." in again.content.decode()
    assert AuditEvent.objects.filter(action="gpu_request.release").count() == 1


def test_a_lead_asks_the_owner_of_an_idle_allocation_to_release_it(
    client_for,
    lead,
    developer,
    outsider,
    finance_user,
    usage,
    tasks_in_process,
    mailoutbox,
    django_capture_on_commit_callbacks,
) -> None:
    remind = reverse("metering:idle-remind", args=["vision", usage.idle.pk])
    assert client_for(outsider).post(remind).status_code == 404
    assert client_for(developer).post(remind).status_code == 404
    assert client_for(finance_user).post(remind).status_code == 403

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(lead).post(f"{remind}?hours=24", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert f"is asked to release allocation {usage.idle.pk}" in response.content.decode()
    event = AuditEvent.objects.get(action="gpu_request.idle_remind")
    assert (event.actor, event.target_id) == (lead, str(usage.idle.pk))
    [mail] = mailoutbox
    assert mail.to == [usage.idle.requester.email]
    assert f"Allocation {usage.idle.pk} sits idle" in mail.subject
    usage.idle.refresh_from_db()
    assert usage.idle.state == RequestState.APPROVED  # a word, not a release


def test_without_javascript_release_goes_back_to_the_page_with_a_message(
    client_for, lead, usage
) -> None:
    release = reverse("metering:idle-release", args=["vision", usage.idle.pk])
    asked = client_for(lead).post(release)
    assert 'data-testid="confirm"' in asked.content.decode()
    response = client_for(lead).post(release, CONFIRMED, follow=True)
    assert response.redirect_chain[-1][0] == reverse("metering:tenant", args=["vision"])
    assert f"Allocation {usage.idle.pk} is released." in response.content.decode()


def test_the_idle_look_back_leaves_out_allocations_idle_only_before_it(
    client_for, lead, usage
) -> None:
    # One hour back: the current and the next hour; still idle.
    html = loaded(client_for(lead), "tenant", usage.params | {"hours": "1"}, "vision")
    assert f'data-testid="idle-{usage.idle.pk}"' in html


def test_the_idle_allocations_load_after_the_page_with_its_look_back(
    client_for, lead, developer, outsider, usage
) -> None:
    client = client_for(lead)
    params = usage.params | {"hours": "24"}
    html = page(client, "tenant", params, "vision").content.decode()
    url = f"{reverse('metering:tenant-idle', args=['vision'])}?{urlencode(params)}"
    shown = url.replace("&", "&amp;")
    # A placeholder htmx replaces, with a link for no JavaScript; the page has no idle rows.
    assert f'hx-get="{shown}" hx-trigger="load"' in html
    assert f'href="{shown}#idle"' in html
    assert f'data-testid="idle-{usage.idle.pk}"' not in html

    fragment = client.get(url, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200
    assert fragment["Vary"].count("HX-Request") == 1
    assert fragment.content.decode().lstrip().startswith('<section class="card" id="idle"')
    assert f'data-testid="idle-{usage.idle.pk}"' in fragment.content.decode()

    # Without JavaScript: the page, with the idle allocations written in.
    alone = client.get(url).content.decode()
    assert f'data-testid="idle-{usage.idle.pk}"' in alone
    assert 'data-testid="usage-section-idle"' not in alone
    assert "Per member" in alone  # the rest of the page

    # A bad look-back is refused beside its field; whoever may not see the usage gets 404.
    refused = client.get(url.replace("hours=24", "hours=0"), HTTP_HX_REQUEST="true")
    assert refused.status_code == 400
    for person in (developer, outsider):
        assert client_for(person).get(url, HTTP_HX_REQUEST="true").status_code == 404
        assert client_for(person).get(url).status_code == 404


# The watermark


def test_every_page_shows_the_watermark(client_for, developer, lead, admin_user, usage) -> None:
    # Windows were collected for four scattered hours: complete up to the first gap.
    until = MeteringState.objects.get(cluster=usage.cluster).complete_until
    assert until == usage.now_hour - timedelta(days=3) + timedelta(hours=1)
    for client, name, args in (
        (client_for(developer), "mine", []),
        (client_for(lead), "tenant", ["vision"]),
        (client_for(admin_user), "all", []),
    ):
        html = page(client, name, usage.params, *args).content.decode()
        assert f'Usage complete until <time datetime="{until.isoformat()}">' in html
        assert "on cluster demo" in html
        assert 'data-testid="demo-badge"' not in html


def test_a_cluster_not_collected_yet_and_demo_data_are_said_so(client_for, developer) -> None:
    metered_cluster(demo=True)
    html = client_for(developer).get(reverse("metering:mine")).content.decode()
    assert "Usage on cluster demo: not collected yet" in html
    assert 'data-testid="demo-badge"' in html


# Navigation and links


def test_navigation_and_the_tenant_page_lead_to_the_usage_pages(
    client_for, developer, lead, finance_user, usage
) -> None:
    start = reverse("tenants:detail", args=["vision"])
    tenant_usage = reverse("metering:tenant", args=["vision"])
    developer_html = client_for(developer).get(reverse("metering:mine")).content.decode()
    assert f'href="{reverse("metering:mine")}"' in developer_html
    assert f'href="{reverse("metering:all")}"' not in developer_html
    assert tenant_usage not in client_for(developer).get(start).content.decode()
    assert tenant_usage in client_for(lead).get(start).content.decode()
    assert tenant_usage in client_for(lead).get(reverse("metering:mine")).content.decode()
    finance_html = client_for(finance_user).get(reverse("metering:all")).content.decode()
    assert f'href="{reverse("metering:all")}"' in finance_html


# Bounded queries


@pytest.mark.parametrize("pods_per_day", [1, 40])
def test_the_pages_run_a_bounded_number_of_queries(
    client_for,
    developer,
    lead,
    admin_user,
    gpu_tenant,  # noqa: F811
    catalog,
    pods_per_day,
    django_assert_max_num_queries,
) -> None:
    data = scenario(
        tenant=gpu_tenant,
        developer=developer,
        lead=lead,
        offering=catalog[WHOLE],
        pods_per_day=pods_per_day,
    )
    for person, name, args, limit in (
        (developer, "mine", [], 8),
        (lead, "tenant", ["vision"], 14),
        # Every tenant's: one query more names the tenants its groups are by (by id), and one
        # asks whether the readings kept are current (portal/metering/kept.py); and one more in
        # the first fortnight of a month, when the default fortnight holds the month so far,
        # read from the monthly rollup beside the days before it from the daily one
        # (`usage_totals`): the bound holds on every day of the calendar.
        (admin_user, "all", [], 13),
    ):
        client = client_for(person)
        with django_assert_max_num_queries(limit):
            assert page(client, name, data.params, *args).status_code == 200


def test_a_table_shows_its_first_rows_and_the_csv_has_them_all(
    client_for,
    developer,
    lead,
    gpu_tenant,  # noqa: F811
    catalog,
) -> None:
    data = scenario(
        tenant=gpu_tenant, developer=developer, lead=lead, offering=catalog[WHOLE],
        pods_per_day=PAGE_ROWS + 5,
    )  # fmt: skip
    client = client_for(lead)

    html = page(client, "tenant", data.params, "vision").content.decode()
    download = page(
        client, "tenant", data.params | {"format": "csv", "table": "workloads"}, "vision"
    )

    shown = tables_of(html)["workloads"][1:]
    every = list(csv.reader(io.StringIO(download.getvalue().decode())))[1:]
    assert len(shown) == PAGE_ROWS
    assert len(every) > PAGE_ROWS
    assert f"The first {PAGE_ROWS} of {len(every)} rows" in html


def test_a_tables_rows_are_written_as_the_templates_cells_would_be() -> None:
    """`Table.shown_html` writes each cell as `{{ cell }}` does: escaped, HTML left as it is,
    numbers and dates localised (here in Chinese)."""
    # Rows are text where the views make them; what else a cell could be, written the same.
    cells: list[Any] = [
        "<b>&", mark_safe("<i>kept</i>"), Decimal("1234.5"), date(2026, 11, 29), 7, None,
    ]  # fmt: skip
    table = Table("t", "T", [("c", "C")], [cells, ["plain"]])
    engine = engines["django"]
    cell_by_cell = engine.from_string(
        "{% for row in rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>"
        "{% endfor %}"
    )
    with translation.override("zh-hans"):
        expected = cell_by_cell.render({"rows": table.shown})
        written = engine.from_string("{{ table.shown_html }}").render({"table": table})
    assert written == expected
    assert "&lt;b&gt;&amp;" in written
    assert "<i>kept</i>" in written
