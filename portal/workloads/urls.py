from django.urls import path

from portal.workloads import views

app_name = "workloads"

urlpatterns = [
    path("notebooks/", views.notebooks, name="list"),
    path("notebooks/new/", views.notebook_new, name="new"),
    path("notebooks/new/preview/", views.notebook_preview, name="preview"),
    path("notebooks/<int:pk>/", views.notebook_detail, name="detail"),
    path("notebooks/<int:pk>/delete/", views.notebook_delete, name="delete"),
    path(
        "notebooks/<int:pk>/<slug:action>/",
        views.notebook_action,
        name="action",
    ),
]
