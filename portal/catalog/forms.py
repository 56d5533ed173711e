"""Forms for the catalog pages. They parse; the catalog services validate and write."""

from collections.abc import Iterator
from typing import Any

from django import forms
from django.utils.choices import BaseChoiceIterator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.catalog.cache import catalog_kept
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX, LINE_MAX_LENGTH, TEXT_MAX_LENGTH


def _enabled_gpu_models() -> list[tuple[str, str]]:
    return [(model.slug, str(model)) for model in GpuModel.objects.filter(enabled=True)]


class _EnabledGpuModels(BaseChoiceIterator):
    """The choices of an `EnabledGpuModelField`, read when the select is written."""

    def __init__(self, field: forms.ModelChoiceField) -> None:  # type: ignore[type-arg]
        self.field = field

    def __iter__(self) -> Iterator[tuple[str, str]]:
        if self.field.empty_label is not None:
            yield "", str(self.field.empty_label)
        yield from catalog_kept("enabled-gpu-models", _enabled_gpu_models)


class EnabledGpuModelField(forms.ModelChoiceField):  # type: ignore[type-arg]
    """An enabled GPU model, chosen by slug. Its select is written from the catalog's rows kept
    in the process (`catalog_kept`), not a query of the GPU models on every page that offers
    one (a tenant page's two forms: 1.5 ms each); what is posted is checked as Django's
    field checks it, against the enabled models in the database."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            queryset=GpuModel.objects.filter(enabled=True), to_field_name="slug", **kwargs
        )

    def _get_choices(self) -> BaseChoiceIterator:
        return _EnabledGpuModels(self)

    # As Django's own field declares it (the setter is ChoiceField's).
    choices = property(_get_choices, forms.ChoiceField.choices.fset)  # type: ignore[union-attr]


class KeyValueLinesField(forms.CharField):
    """`name=value` lines, one per line, as a dict (order kept)."""

    widget = forms.Textarea(attrs={"rows": 3})

    def to_python(self, value: Any) -> dict[str, str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        pairs: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            name, equals, item = (part.strip() for part in line.partition("="))
            if not equals or not name or not item:
                raise forms.ValidationError(
                    gettext("Line %(number)s is not name=value: %(line)s.")
                    % {"number": number, "line": repr(line.strip())}
                )
            if name in pairs:
                # A pod spec has one quantity per name; silently keeping the last would hide a typo.
                raise forms.ValidationError(
                    gettext("Line %(number)s repeats %(name)s.")
                    % {"number": number, "name": repr(name)}
                )
            pairs[name] = item
        return pairs

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return "\n".join(f"{name}={item}" for name, item in value.items())
        return value


class CommaListField(forms.CharField):
    """Names separated by commas. Kept as text: the service splits it into a list and drops
    blanks; a list (an edited object's value) is shown joined."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value


class GpuModelForm(BoundedForm):
    slug = forms.CharField(label=_("Slug"), max_length=61)
    name = forms.CharField(label=_("Name"), max_length=100)
    vendor = forms.CharField(label=_("Vendor"), max_length=32, initial="NVIDIA")
    memory_mib = forms.IntegerField(label=_("Memory (MiB)"), min_value=1, max_value=INTEGER_MAX)
    node_label_key = forms.CharField(
        label=_("Node label key"), max_length=253, initial="nvidia.com/gpu.product"
    )
    node_label_value = forms.CharField(
        label=_("Node label value"),
        max_length=63,
        help_text=_("As GPU feature discovery writes it, e.g. NVIDIA-A100-SXM4-80GB"),
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)


class SharingBackendForm(BoundedForm):
    slug = forms.CharField(label=_("Slug"), max_length=61)
    name = forms.CharField(label=_("Name"), max_length=100)
    description = forms.CharField(
        label=_("Description"),
        required=False,
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    memory_isolation = forms.BooleanField(label=_("Memory isolation"), required=False)


class OfferingForm(BoundedForm):
    slug = forms.CharField(label=_("Slug"), max_length=61)
    name = forms.CharField(label=_("Name"), max_length=100)
    gpu_model = forms.ModelChoiceField(
        queryset=GpuModel.objects.all(), to_field_name="slug", label=_("GPU model")
    )
    backend = forms.ModelChoiceField(
        queryset=SharingBackend.objects.all(), to_field_name="slug", label=_("Sharing backend")
    )
    size = forms.CharField(
        label=_("Size"), max_length=32, help_text=_("As people say it: 1 GPU, 1g.10gb, 1/4")
    )
    whole = forms.BooleanField(
        label=_("Whole"), required=False, help_text=_("One unit is one or more whole GPUs")
    )
    resources = KeyValueLinesField(
        label=_("Resources"),
        help_text=_("One extended resource per line: nvidia.com/mig-1g.10gb=1"),
    )
    annotations = KeyValueLinesField(
        label=_("Annotations"),
        required=False,
        help_text=_("Pod annotations, one per line: nvidia.com/use-gputype=A100"),
    )
    gpu_eq = forms.CharField(
        max_length=40, label=_("GPU-eq per unit"), help_text=_("Exact: 1, 0.25 or 1/7")
    )
    max_units_per_workload = forms.IntegerField(
        label=_("Max units per workload"), min_value=1, max_value=INTEGER_MAX, required=False
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)


class GpuPoolForm(BoundedForm):
    cluster = forms.CharField(label=_("Cluster"), max_length=63, initial="default")
    name = forms.CharField(label=_("Name"), max_length=63)
    gpu_model = forms.ModelChoiceField(
        queryset=GpuModel.objects.all(), to_field_name="slug", label=_("GPU model")
    )
    backend = forms.ModelChoiceField(
        queryset=SharingBackend.objects.all(), to_field_name="slug", label=_("Sharing backend")
    )
    node_count = forms.IntegerField(
        label=_("Node count"), min_value=0, max_value=INTEGER_MAX, initial=0
    )
    gpus_per_node = forms.IntegerField(
        label=_("GPUs per node"), min_value=1, max_value=INTEGER_MAX, initial=8
    )


class NotebookImageForm(BoundedForm):
    slug = forms.CharField(label=_("Slug"), max_length=61)
    name = forms.CharField(
        label=_("Name"), max_length=100, help_text=_("As developers see it: PyTorch (CUDA 12)")
    )
    image = forms.CharField(
        label=_("Image"),
        max_length=300,
        help_text=_(
            "A Jupyter Docker Stacks image or one built on them, with a pinned tag: "
            "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-17"
        ),
    )
    description = forms.CharField(
        label=_("Description"),
        required=False,
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    vendors = CommaListField(
        required=False,
        max_length=LINE_MAX_LENGTH,
        label=_("GPU vendors"),
        help_text=_(
            "Comma-separated, as the GPU models name them: NVIDIA, AMD; empty for every vendor"
        ),
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)
