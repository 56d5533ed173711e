"""Helpers for the directory sync's tests."""

from portal.directory.models import DirectoryChange
from portal.directory.tasks import send_directory_changes

LEADS = "/gpu-portal/tenants/{}/leads"
DEVELOPERS = "/gpu-portal/tenants/{}/developers"


def send() -> dict[str, int | str]:
    """What the beat does every minute: the send task, run here and now."""
    result = send_directory_changes()
    assert isinstance(result, dict), result
    return result


def changes() -> list[DirectoryChange]:
    return list(DirectoryChange.objects.order_by("id"))
