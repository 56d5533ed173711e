"""Errors the allocations app's tasks name: defined apart from the webhook gateway so that the
tasks can retry on them without importing it."""


class WebhookFailed(Exception):
    """The receiver could not be reached or answered with a server error; worth trying again."""
