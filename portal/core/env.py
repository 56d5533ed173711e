"""Typed readers for configuration from environment variables.

Every reader names the variable in its error, so a wrong value stops start-up with a message
an operator can act on. Secrets are read from `NAME` or from the file named by `NAME_FILE`
(the way container orchestrators mount secrets); setting both is an error.
"""

import ipaddress
import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Env:
    """Reads settings from a mapping of environment variables (os.environ by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def _raw(self, name: str) -> str | None:
        value = self._environ.get(name)
        return None if value is None else value.strip()

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._raw(name)
        return default if value in (None, "") else value

    def text_or(self, name: str, default: str) -> str:
        return self.text(name) or default

    def flag(self, name: str, *, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")

    def integer(
        self, name: str, *, default: int, minimum: int = 0, maximum: int | None = None
    ) -> int:
        value = self._raw(name)
        if value in (None, ""):
            return default
        try:
            number = int(value)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}") from None
        if number < minimum:
            raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}")
        if maximum is not None and number > maximum:
            raise ImproperlyConfigured(f"{name} must be at most {maximum}, not {number}")
        return number

    def minutes(
        self, name: str, *, default: int, minimum: int = 1, maximum: int | None = None
    ) -> timedelta:
        """A duration given in whole minutes (`NAME_MINUTES=15`)."""
        return timedelta(
            minutes=self.integer(name, default=default, minimum=minimum, maximum=maximum)
        )

    def items(self, name: str, *, default: list[str]) -> list[str]:
        value = self._raw(name)
        if value is None:
            return default
        return [item.strip() for item in value.split(",") if item.strip()]

    def choice(self, name: str, *, choices: tuple[str, ...], default: str) -> str:
        value = self.text(name, default)
        if value not in choices:
            raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return value

    def networks(
        self, name: str, *, default: list[str]
    ) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        networks = []
        for item in self.items(name, default=default):
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ImproperlyConfigured(
                    f"{name} must list networks in CIDR form, {item!r} is not one"
                ) from None
        return networks

    def secret(self, name: str, default: str | None = None) -> str | None:
        """`NAME`, or the contents of the file named by `NAME_FILE` (trailing newline removed)."""
        value = self._raw(name)
        file_name = self._raw(f"{name}_FILE")
        if value and file_name:
            raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
        if file_name:
            try:
                return Path(file_name).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as error:
                raise ImproperlyConfigured(
                    f"{name}_FILE names {file_name!r}, which cannot be read: {error.strerror}"
                ) from None
        return value or default
