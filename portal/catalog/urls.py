from django.urls import path

from portal.catalog import views

app_name = "catalog"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("models/new/", views.model_create, name="model-create"),
    path("models/<slug:slug>/edit/", views.model_edit, name="model-edit"),
    path("backends/new/", views.backend_create, name="backend-create"),
    path("offerings/new/", views.offering_create, name="offering-create"),
    path("offerings/<slug:slug>/edit/", views.offering_edit, name="offering-edit"),
    path("pools/new/", views.pool_create, name="pool-create"),
    path("images/new/", views.image_create, name="image-create"),
    path("images/<slug:slug>/edit/", views.image_edit, name="image-edit"),
]
