"""The catalog's offerings, GPU models and notebook images, kept in each process between
requests, with the clusters (`catalog_keeps`).

Every list of requests, extensions or notebooks shows each row's offering and GPU model (a
notebook's also its image and cluster). They came in a prefetch query each per list (a few
dozen rows in all, changed only when an admin edits the catalog), about 2.5 ms of a 20 ms page
of 50 requests. A queryset of `CatalogPrefetching` serves its `prefetch_related` lookups that
end at a kept model through a chain of foreign keys (`"offering"`, `"request__gpu_model"`,
`"cluster"`) from `catalog_rows()` instead; other lookups go to Django as before.

The rows are current: the shared cache (Redis) holds a catalog version that every save or
delete of a kept row (or a GPU pool) moves, at once and again when its transaction commits
(`catalog_changed`, from the signals `catalog_signals_connect` connects), and each use compares
it with the version the process's rows were read at. They are also read again at least every
`KEEP_SECONDS` (a change whose new version Redis missed). Without a shared cache, when Redis does
not answer, or when a row names one the process has not read, the lookups are served by
Django's prefetch queries as before. Each list gets its own copies of the rows it shows, so no
list can change another's. Writes that send no signals (`QuerySet.update`, raw SQL) must call
`catalog_changed` themselves; the catalog app has none.
"""

import contextlib
import copy
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache, caches
from django.core.exceptions import FieldDoesNotExist
from django.db import models, transaction
from django.db.models.fields.related import ForeignKey
from django.utils.functional import cached_property
from redis.exceptions import RedisError

from portal.catalog.models import GpuModel, GpuPool, NotebookImage, Offering
from portal.core import per_request
from portal.core.cache import PortalRedisCache

VERSION_KEY = "catalog-version"
KEEP_SECONDS = 60.0

# The models every row of which the catalog's rows hold: the catalog's offerings, GPU models
# and notebook images, and small tables of the apps above that lists show on each row
# (`catalog_keeps`: the clusters).
_KEPT_MODELS: list[type[models.Model]] = [Offering, GpuModel, NotebookImage]


class _Tables(dict[type[models.Model], dict[int, models.Model]]):
    """Each kept model's rows by id, read the first time they are wanted: a list of requests
    reads no cluster."""

    def __missing__(self, model: type[models.Model]) -> dict[int, models.Model]:
        if model not in _KEPT_MODELS:
            raise KeyError(model)
        table = {row.pk: row for row in model._default_manager.all()}
        self[model] = table
        return table


@dataclass
class CatalogRows:
    """Every row of the kept models (`_KEPT_MODELS`) by id, as read at `version` or after
    it (each model's when first wanted)."""

    version: str
    read_at: float
    by_model: _Tables = field(default_factory=_Tables)
    # Values derived from the catalog at this version (`catalog_kept`), by name.
    derived: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def offering_ids(self) -> dict[str, int]:
        """The offerings' ids by slug."""
        return {offering.slug: pk for pk, offering in self.by_model[Offering].items()}  # type: ignore[attr-defined]


class _Kept:
    """The process's rows (shared by its threads)."""

    rows: CatalogRows | None = None


_kept = _Kept()


def _shared() -> bool:
    return isinstance(caches["default"], PortalRedisCache)


def _version() -> str | None:
    """The catalog's version in the shared cache (set now when it has none), or None when
    there is no shared cache or it does not answer. Asked once per read request."""
    return per_request.once(VERSION_KEY, _version_read)


def _version_read() -> str | None:
    if not _shared():
        return None
    try:
        version = cache.get(VERSION_KEY)
        if version is None:
            cache.add(VERSION_KEY, uuid.uuid4().hex, timeout=None)
            version = cache.get(VERSION_KEY)
    except RedisError:
        return None
    return str(version) if version is not None else None


def _copy_of[M: models.Model](row: M) -> M:
    """A shallow copy of `row` as `copy.copy` makes it: its state and its cache of related
    rows copied by Django's own `__getstate__`, the related rows themselves shared. Without
    the rest of pickling's detour that `copy.copy` takes for a model (`__reduce__`, the class
    looked up by name again): half the time, for the tens of catalog rows each list is given.
    A row with a binary value, which `__getstate__` sets apart for pickling, goes the whole
    way."""
    state = row.__getstate__()
    if "_memoryview_attrs" in state:
        return copy.copy(row)
    copied = row.__class__.__new__(row.__class__)
    copied.__dict__.update(state)
    return copied


def catalog_rows(*, fresh: bool = False) -> CatalogRows | None:
    """The catalog as current as the shared cache says (read again when it moved, after
    KEEP_SECONDS, or when `fresh`), or None when there is no shared cache to say it."""
    version = _version()
    if version is None:
        return None
    kept = _kept.rows
    if (
        not fresh
        and kept is not None
        and kept.version == version
        and time.monotonic() - kept.read_at < KEEP_SECONDS
    ):
        return kept
    rows = CatalogRows(version, time.monotonic())
    _kept.rows = rows
    return rows


def catalog_kept[T](name: str, read: Callable[[], T]) -> T:
    """`read()`, a value derived from the catalog (or its GPU pools), kept in this process as
    long as the catalog's rows are (module docstring); read every time when there is no shared
    cache to say it is current. Callers must not change what it returns."""
    rows = catalog_rows()
    if rows is None:
        return read()
    if name not in rows.derived:
        rows.derived[name] = read()
    kept: T = rows.derived[name]
    return kept


def offering_by_slug(slug: str) -> Offering | None:
    """The offering `slug` with its GPU model, copies of the process's rows (module docstring),
    or as the database has it when there is no shared cache or the rows do not hold it."""
    rows = catalog_rows()
    pk = rows.offering_ids.get(slug) if rows is not None else None
    kept: Any = rows.by_model[Offering][pk] if rows is not None and pk is not None else None
    gpu_model = rows.by_model[GpuModel].get(kept.gpu_model_id) if rows and kept else None
    if gpu_model is None:  # not read by this process (or no rows): as the database has it
        return Offering.objects.select_related("gpu_model").filter(slug=slug).first()
    offering: Offering = _copy_of(kept)
    offering.gpu_model = _copy_of(gpu_model)  # type: ignore[assignment]
    return offering


def _kept_by_id[M: models.Model](model: type[M], ids: Iterable[int]) -> dict[int, M]:
    """The `model` rows `ids`, copies of the process's rows (module docstring), or as the
    database has them (one query) when there is no shared cache or the rows lack one."""
    wanted = set(ids)
    rows = catalog_rows() if wanted else None
    kept: dict[int, Any] = rows.by_model[model] if rows is not None else {}
    if wanted <= kept.keys():
        return {pk: _copy_of(kept[pk]) for pk in wanted}
    found: dict[int, M] = model._default_manager.in_bulk(wanted)
    return found


def gpu_models_by_id(ids: Iterable[int]) -> dict[int, GpuModel]:
    """The GPU models `ids` (`_kept_by_id`)."""
    return _kept_by_id(GpuModel, ids)


def offerings_by_id(ids: Iterable[int]) -> dict[int, Offering]:
    """The offerings `ids` (`_kept_by_id`), without their GPU models."""
    return _kept_by_id(Offering, ids)


def _move_version() -> None:
    per_request.forget(VERSION_KEY)
    if _shared():
        with contextlib.suppress(RedisError):  # read again within KEEP_SECONDS anyway
            cache.set(VERSION_KEY, uuid.uuid4().hex, timeout=None)


def catalog_changed() -> None:
    """An offering or a GPU model changed: every process reads the catalog again. Now (this
    transaction's own reads see it) and once it commits (other processes may have read the
    old rows in between)."""
    _move_version()
    transaction.on_commit(_move_version)


def _on_change(sender: Any, **kwargs: Any) -> None:
    catalog_changed()


def catalog_follows(model: type[models.Model]) -> None:
    """Every save or delete of a `model` row moves the catalog's version (`catalog_changed`):
    for models the catalog's rows or what is kept beside them (`catalog_kept`) depend on."""
    models.signals.post_save.connect(_on_change, sender=model, dispatch_uid=f"catalog-{model}")
    models.signals.post_delete.connect(
        _on_change, sender=model, dispatch_uid=f"catalog-del-{model}"
    )


def catalog_keeps(model: type[models.Model]) -> None:
    """Keep every row of `model` with the catalog's rows, served to `prefetch_related` lookups
    as the offerings are (module docstring), and follow its saves and deletes
    (`catalog_follows`): for a table of a few rows that lists show on each of theirs. A write
    that sends no signal leaves the kept copies up to KEEP_SECONDS behind: the clusters' times
    of their last reconcile and capacity reading (`QuerySet.update`), which no list shows."""
    catalog_follows(model)
    if model not in _KEPT_MODELS:
        _KEPT_MODELS.append(model)


def catalog_signals_connect() -> None:
    catalog_follows(GpuPool)
    for model in (Offering, GpuModel, NotebookImage):
        catalog_keeps(model)


def _foreign_keys(model: type[models.Model], lookup: str) -> list[ForeignKey[Any, Any]] | None:
    """The chain of foreign keys `lookup` follows from `model` when it ends at a kept model
    (`_KEPT_MODELS`), else None."""
    chain: list[ForeignKey[Any, Any]] = []
    current = model
    for name in lookup.split("__"):
        try:
            found = current._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        if not isinstance(found, ForeignKey):
            return None
        chain.append(found)
        current = found.related_model
    return chain if current in _KEPT_MODELS else None


def _attach(
    instances: Sequence[models.Model], chain: list[ForeignKey[Any, Any]], rows: CatalogRows
) -> bool:
    """Set the last key of `chain` on each instance reached through the others (already
    loaded: never a query), from `rows`, each list with its own copies. False, with nothing
    set, when a row names one `rows` does not hold, or an earlier key was not loaded."""
    *through, last = chain
    holders: list[models.Model] = list(instances)
    for key in through:
        reached = []
        for holder in holders:
            if not key.is_cached(holder):
                return False
            related = key.get_cached_value(holder)
            if related is not None:
                reached.append(related)
        holders = reached
    table = rows.by_model[last.related_model]
    ids = {getattr(holder, last.attname) for holder in holders} - {None}
    if not ids <= table.keys():
        return False
    copies = {pk: _copy_of(table[pk]) for pk in ids}
    for holder in holders:
        pk = getattr(holder, last.attname)
        last.set_cached_value(holder, copies[pk] if pk is not None else None)
    return True


class CatalogPrefetching[M: models.Model](models.QuerySet[M]):
    """A queryset whose prefetch lookups of offerings and GPU models are served from the
    process's catalog rows (module docstring)."""

    # Django's private step that runs a fetched queryset's prefetch lookups (QuerySet._fetch_all
    # calls it); tests/catalog/test_cache.py fails if an upgrade changes it.
    def _prefetch_related_objects(self) -> None:
        lookups: Iterable[Any] = self._prefetch_related_lookups  # type: ignore[attr-defined]
        instances: list[M] = self._result_cache or []
        chains = {
            lookup: chain
            for lookup in lookups
            if isinstance(lookup, str) and (chain := _foreign_keys(self.model, lookup))
        }
        rows = catalog_rows() if chains and instances else None
        if rows is None:
            super()._prefetch_related_objects()  # type: ignore[misc]
            return
        rest = []
        for lookup in lookups:
            chain = chains.get(lookup)
            served = chain is not None and (
                _attach(instances, chain, rows)
                or _attach(instances, chain, catalog_rows(fresh=True) or rows)
            )
            if not served:
                rest.append(lookup)
        if rest:
            models.prefetch_related_objects(instances, *rest)
        self._prefetch_done = True
