from django.urls import path

from portal.directory import views

app_name = "directory"

urlpatterns = [
    path("", views.status, name="status"),
    path("changes/<int:pk>/retry/", views.retry, name="retry"),
    path("reconcile/", views.reconcile, name="reconcile"),
]
