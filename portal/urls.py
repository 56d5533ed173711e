from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.accounts.api import IdentityView, MeView, UserList
from portal.accounts.token_api_urls import urlpatterns as token_api_urls
from portal.allocations.api_urls import urlpatterns as allocation_api_urls
from portal.billing.api_urls import urlpatterns as billing_api_urls
from portal.catalog import api as catalog_api
from portal.cluster import api as cluster_api
from portal.core import views as core_views
from portal.core.audit_api import AuditEventList
from portal.directory.api_urls import urlpatterns as directory_api_urls
from portal.metering.api_urls import urlpatterns as usage_api_urls
from portal.workloads.api_urls import urlpatterns as notebook_api_urls
from tenants import api as tenant_api

api_v1 = [
    path("me", MeView.as_view(), name="me"),
    # The slash every other endpoint has answers too; the schema documents `me` once.
    path("me/", MeView.as_view(schema=None)),
    path("identity", IdentityView.as_view(), name="identity"),
    path("users/", UserList.as_view(), name="users"),
    path("audit-events/", AuditEventList.as_view(), name="audit-events"),
    *allocation_api_urls,
    *notebook_api_urls,
    *token_api_urls,
    *directory_api_urls,
    *usage_api_urls,
    *billing_api_urls,
    path("tenants/", tenant_api.TenantList.as_view(), name="tenants"),
    path("tenants/<slug:slug>/", tenant_api.TenantDetail.as_view(), name="tenant"),
    path("tenants/<slug:slug>/members/", tenant_api.MemberList.as_view(), name="members"),
    path(
        "tenants/<slug:slug>/members/<str:username>/",
        tenant_api.MemberDetail.as_view(),
        name="member",
    ),
    path(
        "tenants/<slug:slug>/quota-requests/",
        tenant_api.QuotaRequestList.as_view(),
        name="quota-requests",
    ),
    path(
        "tenants/<slug:slug>/quota-requests/<int:pk>/approve",
        tenant_api.QuotaRequestDecision.as_view(decision="approve"),
        name="quota-request-approve",
    ),
    path(
        "tenants/<slug:slug>/quota-requests/<int:pk>/reject",
        tenant_api.QuotaRequestDecision.as_view(decision="reject"),
        name="quota-request-reject",
    ),
    path("gpu-models/", catalog_api.GpuModelList.as_view(), name="gpu-models"),
    path("gpu-models/<slug:slug>/", catalog_api.GpuModelDetail.as_view(), name="gpu-model"),
    path("offerings/", catalog_api.OfferingList.as_view(), name="offerings"),
    path("offerings/<slug:slug>/", catalog_api.OfferingDetail.as_view(), name="offering"),
    path("pools/", catalog_api.GpuPoolList.as_view(), name="pools"),
    path("pools/<slug:cluster>/<slug:name>/", catalog_api.GpuPoolDetail.as_view(), name="pool"),
    path("notebook-images/", catalog_api.NotebookImageList.as_view(), name="notebook-images"),
    path(
        "notebook-images/<slug:slug>/",
        catalog_api.NotebookImageDetail.as_view(),
        name="notebook-image",
    ),
    path("capacity/", cluster_api.CapacityList.as_view(), name="capacity"),
    path("clusters/", cluster_api.ClusterList.as_view(), name="clusters"),
    path("clusters/<slug:name>/", cluster_api.ClusterDetail.as_view(), name="cluster"),
    path("provisioning-runs/", cluster_api.ProvisioningRunList.as_view(), name="provisioning-runs"),
    path(
        "provisioning-runs/<int:pk>/",
        cluster_api.ProvisioningRunDetail.as_view(),
        name="provisioning-run",
    ),
    path(
        "provisioning-runs/<int:pk>/retry",
        cluster_api.ProvisioningRunRetry.as_view(),
        name="provisioning-run-retry",
    ),
]

urlpatterns = [
    path("", core_views.start, name="start"),
    path("home/", core_views.home, name="home"),
    path("home/panels/<slug:name>/", core_views.home_panel, name="home-panel"),
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("metrics", core_views.metrics, name="metrics"),
    path("accounts/", include("portal.accounts.urls")),
    path("account/tokens/", include("portal.accounts.token_urls")),
    path("manage/directory/", include("portal.directory.urls")),
    path("audit/", core_views.audit_log, name="audit"),
    path("", include("portal.allocations.urls")),
    path("", include("tenants.urls")),
    path("manage/catalog/", include("portal.catalog.urls")),
    path("", include("portal.cluster.urls")),
    path("", include("portal.workloads.urls")),
    path("usage/", include("portal.metering.urls")),
    path("chargeback/", include("portal.billing.urls")),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
]

handler400 = "portal.core.views.bad_request"
handler403 = "portal.core.views.forbidden"
handler404 = "portal.core.views.not_found"
handler500 = "portal.core.views.server_error"
