"""The apps plug into the layers below them when they are ready (README, Architecture).

A lost registration would leave a lower app calling into nothing: these tests fail for each
one, before any page or task finds out.
"""

from django.dispatch import Signal

from portal.accounts import sso
from portal.allocations.selectors import capacity_source, cost_source, price_source
from portal.allocations.signals import allocation_state_changed
from portal.cluster.models import RunKind
from portal.cluster.services.runs import run_kinds
from portal.core import navigation
from portal.workloads.culling import activity_source
from tenants import signals as tenant_signals
from tenants.pages import tenant_sections
from tenants.selectors import allocations_held


def _receiver_modules(signal: Signal) -> set[str]:
    """The modules of the functions connected to `signal` (weak references to live ones)."""
    receivers = (entry[1]() for entry in signal.receivers)
    return {receiver.__module__ for receiver in receivers if receiver is not None}


def test_every_slot_is_filled_by_the_app_that_owns_it() -> None:
    assert sso.memberships_apply.get().__module__ == "tenants.services"
    assert sso.has_tenant_access.get().__module__ == "tenants.selectors"
    assert navigation.persona_resolver.get().__module__ == "tenants.selectors"
    assert allocations_held.get().__module__ == "portal.allocations.ledger"
    assert activity_source.get().__module__ == "portal.metering.activity"
    assert capacity_source.get().__module__ == "portal.cluster.selectors"
    assert price_source.get().__module__ == "portal.billing.pricing"
    assert cost_source.get().__module__ == "portal.billing.pricing"


def test_notebook_runs_are_done_by_the_workloads_app() -> None:
    handler = run_kinds.get(RunKind.NOTEBOOK)
    assert handler.sync.__module__ == "portal.workloads.provisioning"
    assert handler.finished.__module__ == "portal.workloads.services.lifecycle"


def test_the_tenant_page_shows_the_cluster_section() -> None:
    assert tenant_sections.get("provisioning").template == "cluster/tenant_runs.html#provisioning"


def test_each_signal_reaches_the_apps_that_follow_it() -> None:
    assert _receiver_modules(tenant_signals.tenant_changed) == {"portal.cluster.receivers"}
    assert _receiver_modules(tenant_signals.tenant_created) == {"portal.directory.receivers"}
    assert _receiver_modules(tenant_signals.membership_changed) == {"portal.directory.receivers"}
    assert _receiver_modules(tenant_signals.tenant_state_changed) == {
        "portal.allocations.receivers",
        "portal.workloads.receivers",
    }
    assert _receiver_modules(allocation_state_changed) == {"portal.workloads.receivers"}


def test_every_persona_has_a_start_page_and_navigation() -> None:
    for persona in navigation.PERSONAS:
        assert navigation.start_pages.get(persona) == "home"
        assert navigation.navigation_for(persona), persona
    labels = [entry.label for entry in navigation.navigation_for("admin")]
    assert labels == [
        "Home", "My workspace", "Notebooks", "My requests", "Approvals", "Chargeback", "Usage",
        "Tenants", "Quota requests", "Catalog", "Clusters", "Identity", "All requests",
        "Audit log",
    ]  # fmt: skip
