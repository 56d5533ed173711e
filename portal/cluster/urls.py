from django.urls import path

from portal.cluster import views

app_name = "cluster"

urlpatterns = [
    path("capacity/", views.capacity, name="capacity"),
    path("tenants/<slug:slug>/provisioning/", views.tenant_runs, name="tenant-runs"),
    path("provisioning-runs/<int:pk>/", views.run_detail, name="run"),
    path("provisioning-runs/<int:pk>/retry/", views.run_retry, name="run-retry"),
    path("manage/clusters/", views.clusters, name="clusters"),
    path("manage/clusters/new/", views.cluster_create, name="create"),
    path("manage/clusters/<slug:name>/", views.cluster_detail, name="detail"),
    path("manage/clusters/<slug:name>/edit/", views.cluster_edit, name="edit"),
    path("manage/clusters/<slug:name>/refresh/", views.cluster_refresh, name="refresh"),
]
