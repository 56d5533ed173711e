from django import forms
from django.conf import settings
from django.db.models import QuerySet
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.allocations.forms import GpuRequestForm
from portal.allocations.models import GpuRequest
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import NotebookImage
from portal.core.validators import INTEGER_MAX


class LaunchForm(GpuRequestForm):
    """Run on one of my allocations, or request GPUs and launch as soon as they are approved.

    The request fields (tenant, offering, count, duration, justification) are used only when
    no allocation is picked; the services check everything and name the field at fault.
    """

    allocation = forms.ChoiceField(
        required=False,
        label=_("Run on"),
        help_text=_("One of your allocations, or new GPUs requested with this launch."),
    )
    image = forms.ChoiceField(label=_("Image"), help_text=_("Images admins keep for notebooks."))
    name = forms.CharField(
        label=_("Name"),
        required=False,
        max_length=40,
        help_text=_("Lowercase letters, digits and hyphens."),
    )
    # As the notebook's column stores it: up to 999.999 cores.
    cpu_cores = forms.DecimalField(
        label=_("CPU cores"), initial="4", max_digits=6, decimal_places=3, min_value=0
    )
    memory_gib = forms.IntegerField(
        label=_("Memory (GiB)"), initial=16, min_value=1, max_value=INTEGER_MAX
    )
    workspace_gib = forms.IntegerField(
        label=_("Workspace (GiB)"),
        initial=20,
        min_value=1,
        max_value=INTEGER_MAX,
        help_text=_("Kept when the notebook stops."),
    )
    field_order = ["allocation", "tenant", "offering", "count", "duration_hours", "justification"]

    def __init__(
        self,
        *args: object,
        allocations: QuerySet[GpuRequest],
        images: QuerySet[NotebookImage],
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["purpose"]
        for name in ("tenant", "offering", "count"):
            self.fields[name].required = False
        mine = [
            (
                str(allocation.pk),
                gettext(
                    "#%(pk)s · %(count)s x %(offering)s (%(gpu_eq)s GPU-eq) in %(tenant)s, "
                    "%(state)s"
                )
                % {
                    "pk": allocation.pk,
                    "count": allocation.count,
                    "offering": allocation.offering.name,
                    "gpu_eq": gpu_eq_display(allocation.gpu_eq),
                    "tenant": allocation.tenant.slug,
                    "state": allocation.get_state_display(),
                },
            )
            for allocation in allocations
        ]
        new = ("", gettext("New GPUs: request them with this launch"))
        self.fields["allocation"].choices = [new, *mine]  # type: ignore[attr-defined]
        # Outside the f-string: xgettext reads no call inside one.
        any_gpu = gettext("any GPU")
        self.fields["image"].choices = [  # type: ignore[attr-defined]
            (image.slug, f"{image.name} ({', '.join(image.vendors) or any_gpu})")
            for image in images
        ]
        limit = settings.PORTAL_NOTEBOOK_MAX_CPU
        self.fields["cpu_cores"].help_text = gettext(
            "Up to %(limit)s, within the tenant's CPU quota."
        ) % {"limit": limit}
