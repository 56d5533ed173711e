"""Catalog management pages, for admins only: every other persona gets 404.

Each form page parses its form and calls one catalog service; the services validate and write.
"""

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

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


def _posted(request: AuthenticatedHttpRequest) -> QueryDict | None:
    """The form data of a POST (even an empty one, so it is refused visibly), else None."""
    return request.POST if request.method == "POST" else None


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


def _form_page(
    request: AuthenticatedHttpRequest,
    *,
    form: forms.Form,
    title: str,
    save: Callable[[dict[str, Any]], Any],
) -> HttpResponse:
    """The catalog's form pages: save through one service, then back to the overview."""

    def saved(instance: Any) -> HttpResponse:
        messages.success(request, f"{title}: {instance} is saved.")
        return redirect("catalog:overview")

    return form_page(
        request, form=form, template="core/form.html",
        context={"title": title, "cancel_url": reverse("catalog:overview")},
        save=save, success=saved,
    )  # fmt: skip


@login_required
def model_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    return _form_page(
        request,
        form=GpuModelForm(_posted(request)),
        title="New GPU model",
        save=lambda data: services.gpu_model_create(actor=request.user, **data),
    )


@login_required
def model_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    _require_admin(request)
    gpu_model = get_object_or_404(GpuModel, slug=slug)
    return _form_page(
        request,
        form=GpuModelForm(_posted(request), initial=form_initial(gpu_model, GpuModelForm)),
        title=f"Edit {gpu_model.name}",
        save=lambda data: services.gpu_model_update(
            actor=request.user, gpu_model=gpu_model, **data
        ),
    )


@login_required
def backend_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    return _form_page(
        request,
        form=SharingBackendForm(_posted(request)),
        title="New sharing backend",
        save=lambda data: services.sharing_backend_create(actor=request.user, **data),
    )


@login_required
def offering_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    return _form_page(
        request,
        form=OfferingForm(_posted(request)),
        title="New offering",
        save=lambda data: services.offering_create(actor=request.user, **data),
    )


@login_required
def offering_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    _require_admin(request)
    offering = get_object_or_404(Offering, slug=slug)
    initial = form_initial(offering, OfferingForm)
    initial["gpu_eq"] = str(offering.gpu_eq)
    return _form_page(
        request,
        form=OfferingForm(_posted(request), initial=initial),
        title=f"Edit {offering.name}",
        save=lambda data: services.offering_update(actor=request.user, offering=offering, **data),
    )


@login_required
def pool_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    return _form_page(
        request,
        form=GpuPoolForm(_posted(request)),
        title="New GPU pool",
        save=lambda data: services.gpu_pool_create(actor=request.user, **data),
    )


@login_required
def image_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    _require_admin(request)
    return _form_page(
        request,
        form=NotebookImageForm(_posted(request)),
        title="New notebook image",
        save=lambda data: services.notebook_image_create(actor=request.user, **data),
    )


@login_required
def image_edit(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    _require_admin(request)
    image = get_object_or_404(NotebookImage, slug=slug)
    return _form_page(
        request,
        form=NotebookImageForm(_posted(request), initial=form_initial(image, NotebookImageForm)),
        title=f"Edit {image.name}",
        save=lambda data: services.notebook_image_update(
            actor=request.user, notebook_image=image, **data
        ),
    )
