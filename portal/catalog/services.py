"""Every write to the GPU catalog: models, sharing backends, offerings, pools and notebook images.

Each validates the whole object (Kubernetes names and quantities, exact GPU-eq), saves it in
one transaction and records an audit event. Errors name the offending fields.
"""

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from django.db import models, transaction
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.catalog.gpu_eq import GpuEqError, gpu_eq_parse
from portal.catalog.models import GpuModel, GpuPool, NotebookImage, Offering, SharingBackend
from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.errors import ValidationFailed
from portal.core.registry import Slot
from portal.core.services import instance_update

# Whether a cluster is registered under a name: a pool must name one. Clusters are the
# cluster app's, above this one, so it fills this slot with its lookup when it is ready.
cluster_registered: Slot[Callable[[str], bool]] = Slot(
    "cluster lookup", filled_by="the cluster app"
)


def _offering_gpu_eq_problem(value: Any, *, whole: bool) -> tuple[Fraction | None, str | None]:
    try:
        amount = gpu_eq_parse(value)
    except GpuEqError as error:
        message = str(error)
        return None, message[:1].upper() + message[1:] + "."
    if whole:
        if amount <= 0 or amount.denominator != 1:
            return amount, _(
                "A whole-GPU offering counts a positive whole number of GPU-eq per unit."
            )
    elif not 0 < amount <= 1:
        return amount, _("A fractional offering counts more than 0 and at most 1 GPU-eq per unit.")
    return amount, None


# What a create or an update may set, per kind of catalog object.
FIELDS: dict[type[models.Model], tuple[str, ...]] = {
    GpuModel: (
        "slug", "name", "vendor", "memory_mib", "node_label_key", "node_label_value", "enabled",
    ),
    SharingBackend: ("slug", "name", "description", "memory_isolation"),
    Offering: (
        "slug", "name", "gpu_model", "backend", "size", "whole", "resources", "annotations",
        "gpu_eq", "max_units_per_workload", "enabled",
    ),
    GpuPool: ("cluster", "name", "gpu_model", "backend", "node_count", "gpus_per_node"),
    NotebookImage: ("slug", "name", "image", "description", "vendors", "enabled"),
}  # fmt: skip


def _save[M: models.Model](
    *, actor: User | None, instance: M, fields: dict[str, Any], action: str
) -> M:
    """Apply `fields` to `instance`, validate everything, save, audit (instance_update).

    An offering's `gpu_eq` is parsed here, against its `whole` after the change: a bad one is
    named together with the model's own problems, and the stored value is kept."""
    problems: dict[str, list[str]] = {}
    if isinstance(instance, Offering) and "gpu_eq" in fields:
        amount, problem = _offering_gpu_eq_problem(
            fields["gpu_eq"], whole=fields.get("whole", instance.whole)
        )
        fields = {name: value for name, value in fields.items() if name != "gpu_eq"}
        if problem:
            problems["gpu_eq"] = [problem]
        if amount is not None:
            fields["gpu_eq"] = amount
    if isinstance(instance, GpuPool) and (instance._state.adding or "cluster" in fields):
        cluster = str(fields.get("cluster", instance.cluster))
        if not cluster_registered.get()(cluster):
            problems["cluster"] = [
                _("There is no cluster %(cluster)s: register it first.")
                % {"cluster": repr(cluster)}
            ]
    instance_update(
        actor=actor,
        instance=instance,
        changes=fields,
        allowed=FIELDS[type(instance)],
        action=action,
        problems=problems,
        full_clean={"validate_constraints": False},
    )
    return instance


@transaction.atomic
def gpu_model_create(*, actor: User | None, **fields: Any) -> GpuModel:
    return _save(actor=actor, instance=GpuModel(), fields=fields, action="gpu_model.create")


@transaction.atomic
def gpu_model_update(*, actor: User | None, gpu_model: GpuModel, **fields: Any) -> GpuModel:
    return _save(actor=actor, instance=gpu_model, fields=fields, action="gpu_model.update")


@transaction.atomic
def sharing_backend_create(*, actor: User | None, **fields: Any) -> SharingBackend:
    return _save(actor=actor, instance=SharingBackend(), fields=fields, action="backend.create")


@transaction.atomic
def offering_create(*, actor: User | None, **fields: Any) -> Offering:
    """Create an offering. `gpu_eq` is per unit: in (0, 1] unless `whole`."""
    if "gpu_eq" not in fields:
        raise ValidationFailed(_("gpu_eq: required."), fields={"gpu_eq": [_("Required.")]})
    return _save(actor=actor, instance=Offering(), fields=fields, action="offering.create")


@transaction.atomic
def offering_update(*, actor: User | None, offering: Offering, **fields: Any) -> Offering:
    return _save(actor=actor, instance=offering, fields=fields, action="offering.update")


@transaction.atomic
def gpu_pool_create(*, actor: User | None, **fields: Any) -> GpuPool:
    """Add a pool of nodes to a registered cluster. An unknown cluster is refused naming the
    field; a name taken in that cluster is a Conflict."""
    return _save(actor=actor, instance=GpuPool(), fields=fields, action="gpu_pool.create")


@transaction.atomic
def gpu_pool_update(*, actor: User | None, pool: GpuPool, **fields: Any) -> GpuPool:
    """Change a pool (fields as for gpu_pool_create); the next capacity read counts it anew."""
    pool = GpuPool.objects.select_for_update().get(pk=pool.pk)
    return _save(actor=actor, instance=pool, fields=fields, action="gpu_pool.update")


@transaction.atomic
def gpu_pool_delete(*, actor: User | None, pool: GpuPool) -> None:
    """Remove a pool from the catalog: its nodes no longer count as capacity from the next
    read on. Nothing in the cluster changes."""
    audit_record(
        actor=actor,
        action="gpu_pool.delete",
        target=pool,
        changes=changes_between(snapshot(pool, FIELDS[GpuPool]), {}),
    )
    pool.delete()


def _vendor_list(value: Any) -> Any:
    """Vendors as a list of stripped, non-empty names, from a list or a comma-separated string
    (as the form sends them); the first spelling of a repeated name is kept. Anything that is
    neither is passed on unchanged for the model's validator to refuse, naming the field."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        return value
    names: list[Any] = []
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            names.append(item)
            continue
        name = item.strip()
        if name and name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    return names


def _image_fields(fields: dict[str, Any]) -> dict[str, Any]:
    if "vendors" in fields:
        return {**fields, "vendors": _vendor_list(fields["vendors"])}
    return fields


@transaction.atomic
def notebook_image_create(*, actor: User | None, **fields: Any) -> NotebookImage:
    """Add an image to the list developers pick from when they launch a notebook.

    `vendors` is a list or a comma-separated string of GPU vendors, matched case-insensitively
    against GpuModel.vendor; empty means every vendor. A taken slug or name is refused naming it.
    """
    return _save(
        actor=actor,
        instance=NotebookImage(),
        fields=_image_fields(fields),
        action="notebook_image.create",
    )


@transaction.atomic
def notebook_image_update(
    *, actor: User | None, notebook_image: NotebookImage, **fields: Any
) -> NotebookImage:
    """Change an image of the list (fields as for notebook_image_create).

    Notebooks launched already keep the image reference they started with.
    """
    return _save(
        actor=actor,
        instance=notebook_image,
        fields=_image_fields(fields),
        action="notebook_image.update",
    )
