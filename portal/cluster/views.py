"""Provisioning and cluster pages: a tenant's runs (polled while one is in progress), one run's
results, capacity for those who request GPUs, and the admins' cluster pages."""

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from portal.cluster import services
from portal.cluster.filters import CapacityFilter
from portal.cluster.forms import ClusterForm
from portal.cluster.models import Cluster
from portal.cluster.selectors import (
    capacities_for,
    capacity_for,
    capacity_rows_of,
    cluster_for,
    cluster_nodes,
    clusters_for_admin,
    drift_runs,
    failed_runs,
    provisioning_run_for,
    tenant_provisioning_for,
)
from portal.core.errors import ValidationFailed
from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import POLL_DONE, form_initial, form_page, polled_page


@login_required
def tenant_runs(request: AuthenticatedHttpRequest, slug: str) -> HttpResponse:
    """The provisioning fragment of a tenant's page; htmx stops polling once nothing runs."""
    tenant, provisioning = tenant_provisioning_for(request.user, slug)
    context = {"tenant": tenant, "provisioning": provisioning}
    response = render(request, "cluster/tenant_runs.html#provisioning", context)
    if request.htmx and not provisioning.in_progress:
        response.status_code = POLL_DONE
    return response


@login_required
def run_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """One run: per-object results, the rendered YAML, and Retry for admins when it failed."""
    run = provisioning_run_for(request.user, pk)
    context = {
        "run": run,
        "results": list(run.results.all()),
        "is_admin": request.user.is_portal_admin,
    }
    return polled_page(request, "cluster/run.html", "run-status", context, moving=not run.finished)


@login_required
@require_POST
def run_retry(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    run = provisioning_run_for(request.user, pk)
    services.provisioning_run_retry(actor=request.user, run=run)
    messages.success(request, _("Run %(pk)s is queued again.") % {"pk": run.pk})
    return redirect("cluster:run", pk=run.pk)


@login_required
def capacity(request: AuthenticatedHttpRequest) -> HttpResponse:
    """What is free per cluster, pool and offering, for everyone who may request GPUs."""
    filters = CapacityFilter(request.GET, queryset=capacities_for(request.user), request=request)
    rows = [row for row in capacity_rows_of(filters.qs) if row.total]
    return render(request, "cluster/capacity.html", {"rows": rows, "filters": filters.form})


@login_required
def clusters(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(
        request, "cluster/clusters.html", {"clusters": list(clusters_for_admin(request.user))}
    )


@login_required
def cluster_detail(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    """An admin's view of one cluster: capacity per offering and node, drift, failed runs."""
    cluster = cluster_for(request.user, name)
    context = {
        "cluster": cluster,
        "capacity": [row for row in capacity_for(request.user, cluster=cluster.name) if row.total],
        "nodes": cluster_nodes(cluster),
        "drift_runs": drift_runs(cluster),
        "failed_runs": failed_runs(cluster),
    }
    return render(request, "cluster/cluster.html", context)


def _cluster_form_page(
    request: AuthenticatedHttpRequest, *, cluster: Cluster | None
) -> HttpResponse:
    initial = form_initial(cluster, ClusterForm) if cluster else None
    form = ClusterForm(request.POST if request.method == "POST" else None, initial=initial)
    if cluster is not None:
        form.fields["name"].disabled = True

    def save(data: dict[str, Any]) -> Cluster:
        name = data.pop("name")
        if cluster is None:
            return services.cluster_create(actor=request.user, name=name, **data)
        return services.cluster_update(actor=request.user, cluster=cluster, **data)

    def saved(done: Cluster) -> HttpResponse:
        messages.success(
            request,
            _("Cluster %(name)s is saved; its tenants are being provisioned.")
            % {"name": done.name},
        )
        return redirect("cluster:detail", name=done.name)

    title = (
        _("Edit cluster %(name)s") % {"name": cluster.name} if cluster else _("Register a cluster")
    )
    return form_page(
        request,
        form=form,
        template="core/form.html",
        context={
            "title": title,
            "intro": _(
                "Credentials stay out of the portal's database: use the portal's own "
                "service account (in-cluster) or a kubeconfig file mounted from a secret."
            ),
            "cancel_url": reverse("cluster:detail", args=[cluster.name])
            if cluster
            else reverse("cluster:clusters"),
        },
        save=save,
        success=saved,
    )


@login_required
def cluster_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    clusters_for_admin(request.user)
    return _cluster_form_page(request, cluster=None)


@login_required
def cluster_edit(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    return _cluster_form_page(request, cluster=cluster_for(request.user, name))


class RefreshForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("reconcile", gettext_lazy("reconcile")), ("capacity", gettext_lazy("capacity"))]
    )


@login_required
@require_POST
def cluster_refresh(request: AuthenticatedHttpRequest, name: str) -> HttpResponse:
    cluster = cluster_for(request.user, name)
    form = RefreshForm(request.POST)
    if not form.is_valid():
        raise ValidationFailed(
            _("Choose reconcile or capacity."), fields={"action": [_("Required.")]}
        )
    what = form.cleaned_data["action"]
    services.cluster_refresh_request(actor=request.user, cluster=cluster, what=what)
    queued = {
        "reconcile": _("Reconcile of %(name)s is queued."),
        "capacity": _("Capacity of %(name)s is queued."),
    }
    messages.success(request, queued[what] % {"name": cluster.name})
    return redirect("cluster:detail", name=cluster.name)
