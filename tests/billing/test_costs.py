"""What allocations cost so far, on My requests and the notebooks list."""

from datetime import timedelta

from django.utils import timezone

from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.services import rate_card_create
from portal.workloads.services import notebook_launch
from tests.workloads.conftest import dry_cluster  # noqa: F401  (a fixture)


def test_my_requests_and_the_notebooks_list_show_the_cost_so_far(
    client_for,
    developer,
    finance_user,
    a100_tenant,
    catalog,
    dry_cluster,  # noqa: F811
) -> None:
    whole = catalog["a100-80gb-whole"]
    started = timezone.now() - timedelta(hours=2)
    rate_card_create(
        actor=finance_user, gpu_model=whole.gpu_model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="2.50", effective_from=(started - timedelta(days=1)).date(),
    )  # fmt: skip
    allocation = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=1)
    notebook = notebook_launch(actor=developer, allocation_id=allocation.pk, image="minimal-python")
    GpuRequest.objects.filter(pk=allocation.pk).update(
        starts_at=started, ends_at=started + timedelta(hours=8)
    )
    pending = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=2)
    client = client_for(developer)

    requests_page = client.get("/requests/").content.decode()
    notebooks_page = client.get("/notebooks/").content.decode()

    # Two hours of one GPU at 2.50 EUR (give or take the seconds the test takes).
    assert f'data-testid="cost-{allocation.pk}">5.0' in requests_page
    assert f'data-testid="cost-{pending.pk}">—' in requests_page  # holds nothing yet
    assert f'data-testid="notebook-cost-{notebook.pk}" ' in notebooks_page
    assert "5.0" in notebooks_page.split(f'data-testid="notebook-cost-{notebook.pk}"')[1][:120]
