from django.urls import URLPattern, path

from portal.allocations.api import (
    GpuRequestDetail,
    GpuRequestExtend,
    GpuRequestExtensionDetail,
    GpuRequestExtensionList,
    GpuRequestExtensionTransition,
    GpuRequestList,
    GpuRequestPreviewView,
    GpuRequestTransition,
)
from portal.allocations.services import EXTENSION_DECISIONS, TRANSITIONS

urlpatterns: list[URLPattern] = [
    path("requests/", GpuRequestList.as_view(), name="requests"),
    path("requests/preview", GpuRequestPreviewView.as_view(), name="request-preview"),
    path("requests/<int:pk>/", GpuRequestDetail.as_view(), name="request"),
    *[
        path(
            f"requests/<int:pk>/{transition}",
            (GpuRequestExtend if transition == "extend" else GpuRequestTransition).as_view(
                transition=transition
            ),
            name=f"request-{transition}",
        )
        for transition in TRANSITIONS
    ],
    path("extensions/", GpuRequestExtensionList.as_view(), name="extensions"),
    path("extensions/<int:pk>/", GpuRequestExtensionDetail.as_view(), name="extension"),
    *[
        path(
            f"extensions/<int:pk>/{decision}",
            GpuRequestExtensionTransition.as_view(transition=decision),
            name=f"extension-{decision}",
        )
        for decision in EXTENSION_DECISIONS
    ],
]
