"""Model instances made from the database's rows without `Model.__init__`.

Django makes each row of a list through `Model.from_db`, which calls `Model.__init__`: it
sends `pre_init` and `post_init` and sets each field through `setattr` and its descriptor.
For the 50 rows of a page of requests that was a tenth of the call. A model that mixes in
`LoadedFromRows` overrides `from_db` (Django's documented way to customise loading) and gets
the same instance with the row's values placed in its `__dict__`, as `__init__` places them:
the loaded fields' values (a deferred field is left out, to be read when asked for) and a
`ModelState` that is not adding, of the row's database. Where anything listens to `pre_init`
or `post_init` for the model, Django's own way runs, so that they still hear of each instance.
"""

from collections.abc import Collection
from typing import Any, Self

from django.db import models
from django.db.models.base import ModelState
from django.db.models.fetch_modes import FetchMode
from django.db.models.signals import post_init, pre_init


class LoadedFromRows:
    """A model that makes its instances from rows without `__init__`: mix in before
    `models.Model` (it adds no field and no migration)."""

    @classmethod
    def from_db(
        cls,
        db: str | None,
        field_names: Collection[str],
        values: Collection[Any],
        *,
        fetch_mode: FetchMode | None = None,
    ) -> Self:
        if pre_init.has_listeners(cls) or post_init.has_listeners(cls):
            loaded: Self = models.Model.from_db.__func__(  # type: ignore[attr-defined]
                cls, db, field_names, values, fetch_mode=fetch_mode
            )
            return loaded
        new = cls.__new__(cls)
        state = ModelState()
        state.adding = False
        state.db = db
        if fetch_mode is not None:
            state.fetch_mode = fetch_mode
        # The row's values by the names of its columns (`field_names`, in the order of
        # `values`: every concrete field's attname, or the loaded ones' when some are deferred).
        new.__dict__.update(zip(field_names, values, strict=True))
        new.__dict__["_state"] = state
        return new
