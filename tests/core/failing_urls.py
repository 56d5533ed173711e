"""The portal's URLs plus an API view and a page that fail unexpectedly, to see what callers get
from a bug (tests/core/test_api_errors.py). The portal itself has no such views on purpose."""

from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.urls import handler400, handler403, handler404, handler500
from portal.urls import urlpatterns as portal_urlpatterns


class BugInTheApi(RuntimeError):
    """Stands for any exception nobody expected."""


class FailingApiView(APIView):
    def get(self, request: Request) -> Response:
        raise BugInTheApi("database password is hunter2")


def failing_page(request: HttpRequest) -> HttpResponse:
    raise BugInTheApi("a page failed")


urlpatterns = [
    path("api/v1/failing", FailingApiView.as_view()),
    path("failing-page", failing_page),
    *portal_urlpatterns,
]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
