"""The filters of the catalog's lists (`offerings/`, `pools/`, `notebook-images/`)."""

from django.utils.translation import gettext_lazy as _
from django_filters import CharFilter, FilterSet

from portal.catalog.models import GpuPool, NotebookImage, Offering
from portal.core.filters import StrictBooleanFilter


class OfferingFilter(FilterSet):
    gpu_model = CharFilter(
        field_name="gpu_model__slug", label=_("GPU model"), help_text=_("GPU model slug")
    )
    backend = CharFilter(
        field_name="backend__slug", label=_("Backend"), help_text=_("sharing backend slug")
    )
    enabled = StrictBooleanFilter(label=_("Enabled"), help_text=_("only enabled or disabled ones"))

    class Meta:
        model = Offering
        fields: tuple[str, ...] = ()


class NotebookImageFilter(FilterSet):
    enabled = StrictBooleanFilter(
        label=_("Enabled"),
        help_text=_(
            "admins: only enabled (true) or disabled (false) images; others see enabled ones"
        ),
    )

    class Meta:
        model = NotebookImage
        fields: tuple[str, ...] = ()


class GpuPoolFilter(FilterSet):
    cluster = CharFilter(label=_("Cluster"), help_text=_("cluster name"))
    gpu_model = CharFilter(
        field_name="gpu_model__slug", label=_("GPU model"), help_text=_("GPU model slug")
    )
    backend = CharFilter(
        field_name="backend__slug", label=_("Backend"), help_text=_("sharing backend slug")
    )

    class Meta:
        model = GpuPool
        fields: tuple[str, ...] = ()
