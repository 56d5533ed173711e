from django.urls import URLPattern, path

from portal.workloads.api import NotebookAction, NotebookDetail, NotebookList

ACTIONS = ("start", "stop", "snooze")

urlpatterns: list[URLPattern] = [
    path("notebooks/", NotebookList.as_view(), name="notebooks"),
    path("notebooks/<int:pk>/", NotebookDetail.as_view(), name="notebook"),
    *[
        path(
            f"notebooks/<int:pk>/{action}",
            NotebookAction.as_view(action_name=action),
            name=f"notebook-{action}",
        )
        for action in ACTIONS
    ],
]
