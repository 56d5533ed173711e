"""Values read once for a whole read request, not once per use.

Some readings say whether what a process keeps is still current: the catalog's version in the
shared cache (`portal.catalog.cache`), what usage was read from (`portal.metering.kept`). A
page asks them once per list, chart or table it shows: a lead's tenant usage page read its
usage inputs three times, a list of requests the catalog's version three times. `once(key,
read)` reads a value once per GET or HEAD request handled in this thread and gives that value
to every later use in the same request. Writes do not happen there (a write that moves such
a value, a catalog change, calls `forget(key)`); a POST, a task, a command or a test calling
code directly reads every time.
"""

import threading
from collections.abc import Callable, Hashable
from typing import Any

from django.core.signals import request_finished, request_started

_SAFE_METHODS = frozenset({"GET", "HEAD"})


class _Values(threading.local):
    # None outside a read request: nothing is kept.
    kept: dict[Hashable, Any] | None = None


_values = _Values()


def once[T](key: Hashable, read: Callable[[], T]) -> T:
    """`read()`, read once for the current read request (every time outside one)."""
    kept = _values.kept
    if kept is None:
        return read()
    if key not in kept:
        kept[key] = read()
    value: T = kept[key]
    return value


def forget(key: Hashable) -> None:
    """Read `key` again at its next use (what it reads was just changed)."""
    if _values.kept is not None:
        _values.kept.pop(key, None)


def _started(sender: object, environ: dict[str, Any] | None = None, **kwargs: object) -> None:
    method = (environ or {}).get("REQUEST_METHOD", "")
    _values.kept = {} if method in _SAFE_METHODS else None


def _finished(sender: object, **kwargs: object) -> None:
    _values.kept = None


request_started.connect(_started, dispatch_uid="per-request-started")
request_finished.connect(_finished, dispatch_uid="per-request-finished")
