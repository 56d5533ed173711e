"""The filters of chargeback's lists (`rate-cards/`), for the page and the API alike."""

from django.utils.translation import gettext_lazy as _
from django_filters import CharFilter, FilterSet

from portal.billing.models import RateCard
from portal.core.filters import SlugFilter


class RateCardFilter(FilterSet):
    gpu_model = SlugFilter(
        field_name="gpu_model__slug",
        label=_("GPU model"),
        max_length=61,
        help_text=_("GPU model slug"),
    )
    currency = CharFilter(label=_("Currency"), max_length=3, help_text=_("ISO 4217 code, e.g. EUR"))

    class Meta:
        model = RateCard
        fields: tuple[str, ...] = ()
