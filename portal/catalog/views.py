"""Catalog management pages, for admins only: every other persona gets 404.

One form page serves every kind of catalog object (KINDS): it parses the kind's form and calls
one catalog service; the services validate and write.
"""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import models
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_lazy

from portal.accounts.models import User
from portal.catalog import services
from portal.catalog.forms import (
    GpuModelForm,
    GpuPoolForm,
    NotebookImageForm,
    OfferingForm,
    SharingBackendForm,
)
from portal.catalog.models import GpuModel, GpuPool, NotebookImage, Offering, SharingBackend
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import form_initial, form_page


def _require_admin(request: AuthenticatedHttpRequest) -> None:
    if not request.user.is_portal_admin:
        raise Http404


@login_required
def overview(request: AuthenticatedHttpRequest) -> HttpResponse:
    """GPU models, sharing backends, offerings, pools and notebook images: five queries, whatever
    their number."""
    _require_admin(request)
    offerings = list(Offering.objects.select_related("gpu_model", "backend"))
    # A pool serves the offerings of its GPU model and sharing backend.
    served: dict[tuple[int, int], list[Offering]] = defaultdict(list)
    for offering in offerings:
        served[offering.gpu_model_id, offering.backend_id].append(offering)
    pools = [
        (pool, served[pool.gpu_model_id, pool.backend_id])
        for pool in GpuPool.objects.select_related("gpu_model", "backend")
    ]
    return render(
        request,
        "catalog/overview.html",
        {
            "models": list(GpuModel.objects.all()),
            "backends": list(SharingBackend.objects.all()),
            "offerings": offerings,
            "pools": pools,
            "images": list(NotebookImage.objects.all()),
        },
    )


@dataclass(frozen=True)
class Kind[M: models.Model]:
    """One kind of catalog object its create and edit pages write, through its services."""

    model: type[M]
    form: type[forms.Form]
    new_title: Promise  # gettext_lazy: translated when the page is shown
    create: Callable[..., M]
    # (actor, the object, the form's data) -> the object; None: no edit page
    update: Callable[[User, M, dict[str, Any]], M] | None = None
    initial: Callable[[M], dict[str, Any]] | None = None


def _offering_initial(offering: Offering) -> dict[str, Any]:
    # The exact fraction as entered ("1/4"), not the Fraction's repr.
    return {**form_initial(offering, OfferingForm), "gpu_eq": str(offering.gpu_eq)}


# The `kind` of each catalog:<kind>-create and catalog:<kind>-edit URL.
KINDS: dict[str, Kind[Any]] = {
    "model": Kind(
        model=GpuModel,
        form=GpuModelForm,
        new_title=gettext_lazy("New GPU model"),
        create=services.gpu_model_create,
        update=lambda actor, gpu_model, data: services.gpu_model_update(
            actor=actor, gpu_model=gpu_model, **data
        ),
    ),
    "backend": Kind(
        model=SharingBackend,
        form=SharingBackendForm,
        new_title=gettext_lazy("New sharing backend"),
        create=services.sharing_backend_create,
    ),
    "offering": Kind(
        model=Offering,
        form=OfferingForm,
        new_title=gettext_lazy("New offering"),
        create=services.offering_create,
        update=lambda actor, offering, data: services.offering_update(
            actor=actor, offering=offering, **data
        ),
        initial=_offering_initial,
    ),
    "pool": Kind(
        model=GpuPool,
        form=GpuPoolForm,
        new_title=gettext_lazy("New GPU pool"),
        create=services.gpu_pool_create,
    ),
    "image": Kind(
        model=NotebookImage,
        form=NotebookImageForm,
        new_title=gettext_lazy("New notebook image"),
        create=services.notebook_image_create,
        update=lambda actor, image, data: services.notebook_image_update(
            actor=actor, notebook_image=image, **data
        ),
    ),
}


@login_required
def catalog_form(
    request: AuthenticatedHttpRequest, kind: str, slug: str | None = None
) -> HttpResponse:
    """The create page of a catalog `kind`, or with `slug` the edit page of one object: one
    service call, then back to the overview."""
    _require_admin(request)
    spec = KINDS[kind]
    # Even an empty POST is bound, so it is refused visibly.
    posted = request.POST if request.method == "POST" else None
    if slug is None:
        form = spec.form(posted)
        title = str(spec.new_title)

        def save(data: dict[str, Any]) -> Any:
            return spec.create(actor=request.user, **data)

    else:
        if spec.update is None:
            raise Http404
        update = spec.update
        instance = get_object_or_404(spec.model, slug=slug)
        initial = spec.initial(instance) if spec.initial else form_initial(instance, spec.form)
        form = spec.form(posted, initial=initial)
        title = gettext("Edit %(name)s") % {"name": instance}

        def save(data: dict[str, Any]) -> Any:
            return update(request.user, instance, data)

    def saved(instance: Any) -> HttpResponse:
        messages.success(
            request, gettext("%(title)s: %(name)s is saved.") % {"title": title, "name": instance}
        )
        return redirect("catalog:overview")

    return form_page(
        request, form=form, template="core/form.html",
        context={"title": title, "cancel_url": reverse("catalog:overview")},
        save=save, success=saved,
    )  # fmt: skip
