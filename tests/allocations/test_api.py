import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.allocations.models import GpuRequest
from portal.allocations.serializers import GpuRequestSerializer
from portal.catalog.services import gpu_pool_create
from portal.cluster.models import ProvisioningRun
from portal.cluster.services import cluster_create
from portal.core.models import AuditEvent


def ask(client, **overrides):
    body = {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1, **overrides}
    return client.post("/api/v1/requests/", body, content_type="application/json")


def test_post_answers_with_the_decision(client_for, developer, a100_tenant) -> None:
    client = client_for(developer)

    approved = ask(client)
    pending = ask(client, count=2, justification="training")
    refused = ask(client, count=20)

    assert approved.status_code == 201
    assert approved.json()["state"] == "approved"
    assert approved.json()["gpu_eq"] == "1"
    assert pending.status_code == 201
    assert pending.json()["state"] == "pending"
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "quota_exceeded"
    assert "requested 20 GPU-eq, 9 of 10 remaining" in refused.json()["error"]["message"]
    assert refused.json()["request"]["state"] == "rejected"


@pytest.mark.parametrize("pools", [False, True], ids=["cluster-without-pools", "a-pool-of-a100s"])
def test_a_decision_runs_a_fixed_number_of_queries(
    client_for, developer, admin_user, a100_tenant, catalog, pools, django_assert_max_num_queries
) -> None:
    """An approval queues provisioning in a dry-run cluster. Each decision: the session and
    the user, the tenant with the caller's role, the quota row locked and what it holds, the
    budget, the request and its audit event, the provisioning run joined (cluster, run, link),
    and the transaction. The offering and whether a pool serves it come from the process's
    catalog rows (portal/catalog/cache.py), read by the first decision."""
    cluster_create(actor=admin_user, name="lab")
    if pools:
        whole = catalog["a100-80gb-whole"]
        gpu_pool_create(
            actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
            backend=whole.backend, node_count=1,
        )  # fmt: skip
    client = client_for(developer)
    ask(client)  # the first run of the tenant is created; later approvals join it

    with django_assert_max_num_queries(13):
        approved = ask(client)
    with django_assert_max_num_queries(9):
        refused = ask(client, count=20)

    assert approved.status_code == 201
    assert approved.json()["gpu_model"] == "a100-80gb"
    assert refused.status_code == 409
    assert ProvisioningRun.objects.get().gpu_requests.count() == 2


def test_the_list_reads_only_what_it_shows_of_the_users_and_tenants_it_joins(
    client_for, developer, lead, a100_tenant
) -> None:
    pending = ask(client_for(developer), count=2, justification="training").json()
    approved = client_for(lead).post(
        f"/api/v1/requests/{pending['id']}/approve", {"comment": "ok"}, "application/json"
    )
    assert approved.status_code == 200

    with CaptureQueriesContext(connection) as queries:
        listed = client_for(developer).get("/api/v1/requests/").json()["results"]

    [row] = listed
    assert (row["tenant"], row["requester"], row["decided_by"]) == ("vision", "dev", "lead")
    assert (row["gpu_model"], row["offering"]) == ("a100-80gb", "a100-80gb-whole")
    read = [q["sql"] for q in queries.captured_queries if "allocations_gpurequest" in q["sql"]]
    assert read
    assert not any('"password"' in sql or '"email"' in sql for sql in read)


def test_the_list_s_rows_are_the_serializer_s_and_its_count_reads_no_name(
    client_for, developer, lead, a100_tenant
) -> None:
    """The list reads the names it shows as values (`names_listed`): the same JSON as
    `GpuRequestSerializer` writes from joined rows, and the count joins nothing."""
    pending = ask(client_for(developer), count=2, justification="training").json()
    client_for(lead).post(f"/api/v1/requests/{pending['id']}/approve", {}, "application/json")
    ask(client_for(developer), count=1)
    joined = GpuRequest.objects.select_related("tenant", "requester", "decided_by").order_by(
        "-created_at", "-id"
    )

    client = client_for(lead)
    with CaptureQueriesContext(connection) as queries:
        listed = client.get("/api/v1/requests/", {"page_size": 1}).json()
    # Read now: the next request's start clears the log the capture reads.
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"]]

    assert listed["count"] == 2
    assert listed["results"] == GpuRequestSerializer(joined[:1], many=True).data
    assert client.get("/api/v1/requests/").json()["results"] == (
        GpuRequestSerializer(joined, many=True).data
    )
    assert counts
    assert not any('"tenants_tenant"' in sql or '"accounts_user"' in sql for sql in counts)


@pytest.mark.parametrize(
    ("overrides", "status", "field"),
    [
        ({"offering": "no-such-offering"}, 400, "offering"),
        ({"count": 0}, 400, "count"),
        ({"count": -1}, 400, "count"),
        ({"count": "one"}, 400, "count"),
        ({"duration_hours": 1000}, 400, "duration_hours"),
        ({"offering": "h100-80gb-whole"}, 400, "offering"),
        ({"purpose": "mining"}, 400, "purpose"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    client_for, developer, a100_tenant, overrides, status, field
) -> None:
    response = ask(client_for(developer), **overrides)

    assert response.status_code == status
    assert field in response.json()["error"]["fields"]
    assert not GpuRequest.objects.exists()


def test_a_tenant_the_user_is_not_in_is_404(client_for, outsider, a100_tenant) -> None:
    response = ask(client_for(outsider))

    assert response.status_code == 404
    assert not GpuRequest.objects.exists()


def test_finance_may_not_request(client_for, finance_user, a100_tenant) -> None:
    assert ask(client_for(finance_user)).status_code == 403


def test_a_retried_post_with_the_same_key_returns_the_first_result(
    client_for, developer, a100_tenant
) -> None:
    client = client_for(developer)

    first = client.post(
        "/api/v1/requests/",
        {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="retry-1",
    )
    again = client.post(
        "/api/v1/requests/",
        {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="retry-1",
    )
    other_body = client.post(
        "/api/v1/requests/",
        {"tenant": "vision", "offering": "a100-80gb-whole", "count": 2},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="retry-1",
    )

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert GpuRequest.objects.count() == 1
    assert other_body.status_code == 409
    assert AuditEvent.objects.filter(action="gpu_request.submit").count() == 1


def test_a_failed_post_does_not_keep_its_key(client_for, developer, a100_tenant) -> None:
    client = client_for(developer)

    failed = ask(client, count=0, HTTP_IDEMPOTENCY_KEY="k")
    fixed = client.post(
        "/api/v1/requests/", {"tenant": "vision", "offering": "a100-80gb-whole", "count": 0},
        content_type="application/json", HTTP_IDEMPOTENCY_KEY="k",
    )  # fmt: skip

    assert failed.status_code == fixed.status_code == 400


def test_concurrent_duplicates_create_one_request(transactional_db, developer, a100_tenant) -> None:
    barrier = threading.Barrier(5)

    def post(_: int) -> int:
        client = Client()
        client.force_login(developer)
        try:
            barrier.wait()
            return client.post(
                "/api/v1/requests/",
                {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1},
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY="same",
            ).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=5) as pool:
        statuses = list(pool.map(post, range(5)))

    assert statuses == [201] * 5
    assert GpuRequest.objects.count() == 1


def test_transitions_and_409_with_the_current_state(
    client_for, developer, lead, outsider, a100_tenant
) -> None:
    pending = ask(client_for(developer), count=2).json()

    by_developer = client_for(developer).post(f"/api/v1/requests/{pending['id']}/approve")
    by_outsider = client_for(outsider).post(f"/api/v1/requests/{pending['id']}/approve")
    approved = client_for(lead).post(f"/api/v1/requests/{pending['id']}/approve", {"comment": "ok"})
    cancel_late = client_for(developer).post(f"/api/v1/requests/{pending['id']}/cancel")
    extended = client_for(developer).post(f"/api/v1/requests/{pending['id']}/extend", {"hours": 1})
    released = client_for(developer).post(f"/api/v1/requests/{pending['id']}/release")

    assert by_developer.status_code == 403
    assert by_outsider.status_code == 404
    assert approved.status_code == 200
    assert approved.json()["state"] == "approved"
    assert cancel_late.status_code == 409
    assert "is approved; it cannot be cancelled" in cancel_late.json()["error"]["message"]
    assert extended.status_code == 200
    assert released.json()["state"] == "released"


def test_each_persona_lists_what_it_may_see(
    client_for, developer, lead, outsider, finance_user, a100_tenant
) -> None:
    ask(client_for(developer))
    ask(client_for(lead))

    def count(user):
        return client_for(user).get("/api/v1/requests/").json()["count"]

    assert (count(developer), count(lead), count(outsider), count(finance_user)) == (1, 2, 0, 2)
    first = GpuRequest.objects.earliest("created_at")
    assert client_for(outsider).get(f"/api/v1/requests/{first.pk}/").status_code == 404
