from fractions import Fraction

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.catalog.gpu_eq import gpu_eq_columns, gpu_eq_constraints, gpu_eq_property
from portal.catalog.validators import (
    validate_annotations,
    validate_label_key,
    validate_label_value,
    validate_resources,
)
from portal.core.validators import slug_validator
from portal.core.visibility import VisibleQuerySet, register_scope


class GpuModel(models.Model):
    """A kind of GPU card, e.g. NVIDIA A100-SXM4-80GB, and the node label that selects it."""

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, unique=True)
    vendor = models.CharField(max_length=32)
    memory_mib = models.PositiveIntegerField(
        help_text=_("GPU memory in MiB"), validators=[MinValueValidator(1)]
    )
    node_label_key = models.CharField(
        max_length=253, default="nvidia.com/gpu.product", validators=[validate_label_key]
    )
    node_label_value = models.CharField(max_length=63, validators=[validate_label_value])
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["vendor", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def memory_gib(self) -> Fraction:
        return Fraction(self.memory_mib, 1024)


class SharingBackend(models.Model):
    """How a GPU pool is shared (whole GPUs, MIG, time-slicing, HAMi, ...). Data, not code."""

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    memory_isolation = models.BooleanField(
        default=False, help_text=_("Whether a share's GPU memory is protected from its neighbours")
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Offering(models.Model):
    """What a developer picks: a GPU model x a sharing backend x a size.

    One unit of an offering asks Kubernetes for `resources` (extended resource name ->
    quantity) and counts `gpu_eq` GPU-equivalents against quota and on the bill.
    """

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100)
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="offerings")
    backend = models.ForeignKey(SharingBackend, on_delete=models.PROTECT, related_name="offerings")
    size = models.CharField(
        max_length=32, help_text=_("As people say it: 1 GPU, 1g.10gb, 1/4, 10 GiB")
    )
    whole = models.BooleanField(default=False, help_text=_("One unit is one or more whole GPUs"))
    resources = models.JSONField(validators=[validate_resources])
    annotations = models.JSONField(default=dict, blank=True, validators=[validate_annotations])
    gpu_eq_num, gpu_eq_den = gpu_eq_columns("gpu_eq")
    gpu_eq = gpu_eq_property("gpu_eq")
    max_units_per_workload = models.PositiveIntegerField(
        null=True, blank=True, help_text=_("e.g. 1 for time-sliced shares; empty for no limit")
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["gpu_model__name", "-whole", "backend__name", "slug"]
        constraints = gpu_eq_constraints("gpu_eq", model="offering")

    def __str__(self) -> str:
        return self.name


class GpuPool(models.Model):
    """Nodes of one GPU model in one cluster, shared with one backend at a time.

    The offerings available on a pool are those of its model and backend.
    """

    cluster = models.CharField(max_length=63, default="default")
    name = models.CharField(max_length=63)
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="pools")
    backend = models.ForeignKey(SharingBackend, on_delete=models.PROTECT, related_name="pools")
    node_count = models.PositiveIntegerField(default=0)
    gpus_per_node = models.PositiveIntegerField(default=8)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="pool_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


def validate_vendors(value: object) -> None:
    """A list of GPU vendors, e.g. ["nvidia"]; empty means the image suits every vendor."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValidationError(
            gettext('Write the vendors as a list of names, e.g. ["nvidia", "amd"].')
        )


image_reference_validator = RegexValidator(
    r"^[a-z0-9]+([._/:-][a-z0-9]+)*(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$",
    _("An image reference such as quay.io/jupyter/pytorch-notebook:cuda12-2025-11-17."),
)


class NotebookImage(models.Model):
    """A Jupyter image admins offer for notebooks, and the GPU vendors it suits.

    Written through the catalog services; everyone but admins sees only the enabled images
    (`NotebookImage.objects.visible_to`). A notebook's container runs `start-notebook.py` with
    `JUPYTER_TOKEN`, as the Jupyter Docker Stacks images do, so an image must start that way.
    `vendors` is matched case-insensitively against GpuModel.vendor ("NVIDIA", "AMD"); an
    empty list suits every vendor.
    """

    slug = models.CharField(max_length=61, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=100, unique=True)
    image = models.CharField(max_length=300, validators=[image_reference_validator])
    description = models.TextField(blank=True)
    vendors = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_vendors],
        help_text=_("GPU vendors the image suits, e.g. nvidia; empty for every vendor"),
    )
    enabled = models.BooleanField(default=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def suits(self, vendor: str) -> bool:
        return not self.vendors or vendor.lower() in {item.lower() for item in self.vendors}


def _visible_notebook_images(
    images: models.QuerySet[NotebookImage], user: User
) -> models.QuerySet[NotebookImage]:
    """Admins: every notebook image; everyone else: the enabled ones, which they may launch."""
    return images if user.is_portal_admin else images.filter(enabled=True)


register_scope(NotebookImage, _visible_notebook_images)
