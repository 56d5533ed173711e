from django.urls import URLPattern, path

from portal.directory.api import (
    DirectoryChangeList,
    DirectoryChangeRetry,
    DirectoryReconcile,
    DirectoryReportList,
)

urlpatterns: list[URLPattern] = [
    path("directory/changes/", DirectoryChangeList.as_view(), name="directory-changes"),
    path(
        "directory/changes/<int:pk>/retry",
        DirectoryChangeRetry.as_view(),
        name="directory-change-retry",
    ),
    path("directory/reports/", DirectoryReportList.as_view(), name="directory-reports"),
    path("directory/reconcile", DirectoryReconcile.as_view(), name="directory-reconcile"),
]
