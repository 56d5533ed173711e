from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.accounts.api import MeView
from portal.core import views as core_views
from portal.core.audit_api import AuditEventList

api_v1 = [
    path("me", MeView.as_view(), name="me"),
    path("audit-events/", AuditEventList.as_view(), name="audit-events"),
]

urlpatterns = [
    path("", core_views.start, name="start"),
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("metrics", core_views.metrics, name="metrics"),
    path("accounts/", include("portal.accounts.urls")),
    path("audit/", core_views.audit_log, name="audit"),
    path("", include("tenants.urls")),
    path("manage/catalog/", include("portal.catalog.urls")),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("django-admin/", admin.site.urls),
]

handler400 = "portal.core.views.bad_request"
handler403 = "portal.core.views.forbidden"
handler404 = "portal.core.views.not_found"
handler500 = "portal.core.views.server_error"
