from django.urls import path

from portal.catalog import views

app_name = "catalog"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("models/new/", views.catalog_form, {"kind": "model"}, name="model-create"),
    path("models/<slug:slug>/edit/", views.catalog_form, {"kind": "model"}, name="model-edit"),
    path("backends/new/", views.catalog_form, {"kind": "backend"}, name="backend-create"),
    path("offerings/new/", views.catalog_form, {"kind": "offering"}, name="offering-create"),
    path(
        "offerings/<slug:slug>/edit/",
        views.catalog_form,
        {"kind": "offering"},
        name="offering-edit",
    ),
    path("pools/new/", views.catalog_form, {"kind": "pool"}, name="pool-create"),
    path("images/new/", views.catalog_form, {"kind": "image"}, name="image-create"),
    path("images/<slug:slug>/edit/", views.catalog_form, {"kind": "image"}, name="image-edit"),
]
