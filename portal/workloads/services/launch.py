"""Launching a notebook: on an allocation of the owner's, or on a request made in the same call
(it starts as soon as the request is approved)."""

import logging
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import Offering
from portal.core.errors import Conflict, QuotaExceeded, ValidationFailed
from portal.core.validators import slug_validator
from portal.workloads import selectors
from portal.workloads.models import Notebook, NotebookState
from portal.workloads.services.transitions import _allocation_ready, _go
from tenants.access import Access, tenant_for
from tenants.models import Tenant

logger = logging.getLogger(__name__)


DEFAULT_CPU_CORES = Decimal(4)


DEFAULT_MEMORY_GIB = 16


DEFAULT_WORKSPACE_GIB = 20


def _decimal(value: Any, field: str) -> Decimal:
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValidationFailed.on(field, _("Write a number, e.g. 4 or 0.5.")) from None
    if not number.is_finite():
        raise ValidationFailed.on(field, _("Write a number, e.g. 4 or 0.5."))
    return number


def _whole(value: Any, field: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValidationFailed.on(field, _("Write a whole number.")) from None


def _sizes(
    tenant: Tenant, *, cpu_cores: Any, memory_gib: Any, workspace_gib: Any
) -> tuple[Decimal, int, int]:
    """CPU, memory and workspace within the portal's limits and the tenant's quota."""
    cpu = _decimal(cpu_cores, "cpu_cores")
    cpu_limit = min(Decimal(settings.PORTAL_NOTEBOOK_MAX_CPU), Decimal(tenant.cpu_cores_quota))
    # The limit first: quantize() of a number with a huge exponent (1e999999) raises.
    if cpu > cpu_limit:
        raise ValidationFailed.on(
            "cpu_cores", _("At most %(limit)s cores per notebook here.") % {"limit": cpu_limit}
        )
    if cpu < Decimal("0.1") or cpu != cpu.quantize(Decimal("0.001")):
        raise ValidationFailed.on("cpu_cores", _("Ask for at least 0.1 cores, in steps of 0.001."))
    memory = _whole(memory_gib, "memory_gib")
    memory_limit = min(settings.PORTAL_NOTEBOOK_MAX_MEMORY_GIB, tenant.memory_gib_quota)
    if not 1 <= memory <= memory_limit:
        raise ValidationFailed.on(
            "memory_gib", _("Between 1 and %(limit)s GiB here.") % {"limit": memory_limit}
        )
    workspace = _whole(workspace_gib, "workspace_gib")
    workspace_limit = min(settings.PORTAL_NOTEBOOK_MAX_WORKSPACE_GIB, tenant.storage_gib_quota)
    if not 1 <= workspace <= workspace_limit:
        raise ValidationFailed.on(
            "workspace_gib", _("Between 1 and %(limit)s GiB here.") % {"limit": workspace_limit}
        )
    return cpu, memory, workspace


def _name(value: str, offering: Offering) -> str:
    name = (value or "").strip() or offering.slug[:40]
    if len(name) > 40:
        raise ValidationFailed.on("name", _("At most 40 characters."))
    try:
        slug_validator(name)
    except DjangoValidationError:
        raise ValidationFailed.on(
            "name", _("Lowercase letters, digits and hyphens, starting with a letter or digit.")
        ) from None
    return name


@transaction.atomic
def notebook_launch(
    *,
    actor: User,
    image: str,
    allocation_id: int | None = None,
    tenant: str = "",
    offering: str = "",
    count: int = 1,
    duration_hours: int | None = None,
    justification: str = "",
    name: str = "",
    cpu_cores: Any = DEFAULT_CPU_CORES,
    memory_gib: Any = DEFAULT_MEMORY_GIB,
    workspace_gib: Any = DEFAULT_WORKSPACE_GIB,
) -> Notebook:
    """Launch a notebook on one of the actor's allocations, or request one and launch on it.

    With `allocation_id`: that allocation (another user's or tenant's is NotFound). Without:
    a request for `count` x `offering` in `tenant` goes through the usual decision first; the
    notebook starts once it is approved (at once, or when a lead approves). Bad input raises
    ValidationFailed naming the field, and nothing is written.
    """
    allocation: GpuRequest | None
    if allocation_id is not None:
        allocation = selectors.allocation_for_launch(actor, allocation_id)
        chosen, home = allocation.offering, allocation.tenant
    else:
        if not offering:
            raise ValidationFailed.on(
                "allocation", _("Pick an allocation, or an offering to request.")
            )
        if not tenant:
            raise ValidationFailed.on("tenant", _("Pick the tenant to request the GPU in."))
        home = tenant_for(actor, tenant, Access.REQUEST)
        found = Offering.objects.select_related("gpu_model").filter(slug=offering).first()
        if found is None:
            raise ValidationFailed.on(
                "offering", _("There is no offering %(offering)r.") % {"offering": offering}
            )
        chosen, allocation = found, None
    picked = selectors.image_for_launch(image, chosen)
    cpu, memory, workspace = _sizes(
        home, cpu_cores=cpu_cores, memory_gib=memory_gib, workspace_gib=workspace_gib
    )
    label = _name(name, chosen)
    cluster = selectors.cluster_for_offering(chosen)
    if allocation is None:
        allocation = gpu_request_submit(
            actor=actor,
            tenant=home,
            offering=chosen,
            count=count,
            duration_hours=duration_hours,
            justification=justification,
        )
        if allocation.state == RequestState.REJECTED:
            # Refused like any bad input: nothing is written, the numbers say why.
            raise QuotaExceeded(
                allocation.decision_comment, fields={"count": [allocation.decision_comment]}
            )
    # Lock the allocation, then check it: an expiry or a second launch waits, then sees ours.
    allocation = (
        GpuRequest.objects.select_for_update(of=("self",))
        .select_related("tenant", "offering")
        .get(pk=allocation.pk)
    )
    _allocation_ready(allocation)
    if Notebook.objects.filter(allocation=allocation).exclude(state=NotebookState.DELETED).exists():
        raise Conflict(_("Allocation %(pk)s already has a notebook.") % {"pk": allocation.pk})
    notebook = Notebook(
        tenant=allocation.tenant,
        owner=actor,
        allocation=allocation,
        cluster=cluster,
        name=label,
        image=picked,
        image_reference=picked.image,
        cpu_cores=cpu,
        memory_gib=memory,
        workspace_gib=workspace,
        token=secrets.token_urlsafe(32),
    )
    try:
        with transaction.atomic():
            notebook.save()
    except IntegrityError:
        raise Conflict(
            _("Allocation %(pk)s already has a notebook.") % {"pk": allocation.pk}
        ) from None
    _go(
        notebook,
        actor=actor,
        action="launch",
        before=None,
        reason=gettext_noop("Launching."),
        changes={
            "allocation": [None, allocation.pk],
            "image": [None, picked.image],
            "cpu_cores": [None, str(cpu)],
            "memory_gib": [None, memory],
            "workspace_gib": [None, workspace],
        },
    )
    return notebook
