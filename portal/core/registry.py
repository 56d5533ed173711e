"""Extension points: how a lower app lets the apps above it plug in without importing them.

The apps form layers and import only downwards (README, Architecture). Where a lower app must
call into a higher one (a provisioning run that starts notebooks, a tenant page that shows the
tenant's namespace), the lower app declares a `Slot` or a `Registry` and the higher app fills
it in its `AppConfig.ready()`. Events that many apps follow are Django signals instead.
"""

from collections.abc import Iterator

from django.core.exceptions import ImproperlyConfigured


class Slot[T]:
    """One thing (usually a function) that one higher app provides. Reading an empty slot is a
    configuration error that names it and who fills it."""

    def __init__(self, name: str, *, filled_by: str) -> None:
        self.name = name
        self.filled_by = filled_by
        self._value: T | None = None

    def register(self, value: T) -> T:
        self._value = value
        return value

    def get(self) -> T:
        if self._value is None:
            raise ImproperlyConfigured(
                f"Nothing is registered as the {self.name}: {self.filled_by} registers it when "
                "it is ready. Is that app in INSTALLED_APPS?"
            )
        return self._value


class Registry[K, T]:
    """Entries keyed by name, registered by the apps that own them, read in registration order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[K, T] = {}

    def register(self, key: K, value: T) -> T:
        self._entries[key] = value
        return value

    def get(self, key: K) -> T:
        try:
            return self._entries[key]
        except KeyError:
            raise ImproperlyConfigured(f"No {self.name} is registered for {key!r}.") from None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def values(self) -> list[T]:
        return list(self._entries.values())
