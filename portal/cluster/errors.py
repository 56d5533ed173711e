"""What cluster calls raise: defined apart from the gateway so that tasks and views can name
the errors without importing the gateway."""


class ClusterError(Exception):
    """A cluster call failed; `message` is what admins are shown."""

    transient = False

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ClusterUnavailable(ClusterError):
    """Still failing after the retries: the cluster may answer later."""

    transient = True


class ClusterRefused(ClusterError):
    """The API server refused the request (4xx): retrying the same thing will not help."""
