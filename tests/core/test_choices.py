"""`ChoiceLabel`: the label Django's `get_FOO_display()` gives, for lists that show one per row."""

from django.utils import translation

from portal.allocations.models import GpuRequest, RequestState
from portal.workloads.models import Notebook, NotebookState
from tenants.models import Tenant, TenantState


def test_each_label_is_get_state_display_in_the_active_language() -> None:
    for model, states in (
        (GpuRequest, RequestState),
        (Notebook, NotebookState),
        (Tenant, TenantState),
    ):
        for language in ("en", "zh-hans"):
            with translation.override(language):
                for state in states:
                    row = model(state=state)
                    assert row.state_label == row.get_state_display(), (model, language, state)
    with translation.override("zh-hans"):
        assert GpuRequest(state=RequestState.PENDING).state_label == "待审批"


def test_a_value_that_is_no_choice_is_shown_as_it_is() -> None:
    assert GpuRequest(state="unheard-of").state_label == "unheard-of"
