"""Why a sign-in was refused: defined apart from the OpenID Connect gateway so that views can
name the errors without importing it."""


class SignInRefused(Exception):
    """The sign-in cannot go on: the provider's answer cannot be trusted, or its claims cannot
    be used (no username, a name that belongs to a local account); `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProviderUnavailable(SignInRefused):
    """The provider could not be reached or answered with an error."""
