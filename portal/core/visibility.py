"""Who may see which rows, as structure: one `visible_to(user)` per model, one `get_visible_or_404`.

A model whose rows not everyone may see uses `VisibleQuerySet` as its default manager
(`objects = VisibleQuerySet.as_manager()`); the app that knows the rules registers the model's
scope, a function `(queryset, user) -> queryset` that narrows it to what the user may see. Core
knows no domain app: the tenants app registers the scope of core's `AuditEvent` like its own.
A model with no scope registered refuses `visible_to` rather than show everything.

A scope that is a union of branches (one's own rows OR a led tenant's) says so with
`any_of`: the filter is the same, and a list's page can then read each branch in its own
index order and merge them (`branches_of`, used by portal.core.pagination) where PostgreSQL,
given the OR, walks one index of the whole table filtering row by row.
"""

from collections.abc import Callable, Sequence
from typing import Any, Self

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.sql.where import AND, OR, WhereNode
from django.utils.translation import gettext

from portal.core.errors import NotFound

Scope = Callable[[models.QuerySet[Any], Any], models.QuerySet[Any]]

_scopes: dict[str, Scope] = {}


def register_scope(model: type[models.Model], scope: Scope) -> None:
    """Declare who sees `model`'s rows. One scope per model: registering another is a mistake."""
    label = model._meta.label
    if _scopes.get(label, scope) is not scope:
        raise ImproperlyConfigured(f"{label} already has a visibility scope.")
    _scopes[label] = scope


def has_scope(model: type[models.Model]) -> bool:
    return model._meta.label in _scopes


class VisibleQuerySet[M: models.Model](models.QuerySet[M]):
    """A queryset that narrows itself to what a user may see (NetBox's `restrict`)."""

    # Set by `any_of`: the branches of the visibility filter, and the filter as the query
    # holds it (a node of its WHERE), so that `branches_of` can put each branch in its place.
    _branches: tuple[models.Q, ...] = ()
    _branch_node: WhereNode | None = None

    def _clone(self) -> Self:
        clone: Self = super()._clone()  # type: ignore[misc]  # not in the stubs
        clone._branches, clone._branch_node = self._branches, self._branch_node
        return clone

    def visible_to(self, user: AbstractBaseUser) -> Self:
        """The rows of this queryset that `user` may see, by the model's registered scope."""
        scope = _scopes.get(self.model._meta.label)
        if scope is None:
            raise ImproperlyConfigured(
                f"{self.model._meta.label} has no visibility scope; register one with"
                " portal.core.visibility.register_scope."
            )
        narrowed: Self = scope(self, user)  # type: ignore[assignment]
        return narrowed


def any_of[M: models.Model](
    rows: models.QuerySet[M], combined: models.Q, branches: Sequence[models.Q]
) -> models.QuerySet[M]:
    """`rows` matching `combined`, which is the OR of `branches` (for a scope: one's own rows,
    each led tenant's). Filtered by `combined` alone; the branches are kept, on a
    `VisibleQuerySet`, for `branches_of`. They may overlap."""
    narrowed = rows.filter(combined)
    children = narrowed.query.where.children
    added = children[-1] if len(children) == len(rows.query.where.children) + 1 else None
    if (
        isinstance(narrowed, VisibleQuerySet)
        and len(branches) > 1
        and isinstance(added, WhereNode)
        and added.connector == OR
    ):
        narrowed._branches = tuple(branches)
        narrowed._branch_node = added
    return narrowed


def branches_of[M: models.Model](rows: models.QuerySet[M]) -> list[models.QuerySet[M]] | None:
    """`rows` (a visible queryset, with whatever filters came after) as one queryset per branch
    of its `any_of` filter, each with the other filters and no OR, so that PostgreSQL reads each
    from its own index; together they hold the rows of `rows` (twice where branches overlap).
    None where `rows` has no branches or its WHERE is no longer the AND the filter joined.
    Kept on `rows` (a page and its count both ask)."""
    cached: list[models.QuerySet[M]] | None = rows.__dict__.get("_split")
    if cached is not None:
        return cached
    node = getattr(rows, "_branch_node", None)
    where = rows.query.where
    if node is None or where.connector != AND or where.negated or node not in where.children:
        return None
    split = []
    for branch in rows._branches:  # type: ignore[attr-defined]
        alone = rows.all()
        alone.query.where.children.remove(node)
        alone._branches, alone._branch_node = (), None  # type: ignore[attr-defined]
        split.append(alone.filter(branch))
    rows.__dict__["_split"] = split
    return split


def get_visible_or_404[M: models.Model](
    source: type[M] | models.QuerySet[M], user: AbstractBaseUser, **lookup: Any
) -> M:
    """The one object matching `lookup` among those `user` may see.

    `source` is a model or a queryset of it (for select_related and the like). Raises NotFound
    (404 in pages and API alike) when there is none or the user may not see it: the two are
    not told apart, so names do not leak.
    """
    queryset = source._default_manager.all() if isinstance(source, type) else source
    if not isinstance(queryset, VisibleQuerySet):
        raise ImproperlyConfigured(f"{queryset.model._meta.label} has no visible_to.")
    found: M | None = queryset.visible_to(user).filter(**lookup).first()
    if found is None:
        raise NotFound(not_found_message(queryset.model, **lookup))
    return found


def not_found_message(model: type[models.Model], **lookup: Any) -> str:
    """What a 404 says of the `model` row looked up by `lookup`, whether there is none or the
    user may not see it (the two are not told apart)."""
    return gettext("There is no %(what)s %(key)s.") % {
        "what": model._meta.verbose_name,
        "key": " ".join(
            repr(value) if isinstance(value, str) else str(value) for value in lookup.values()
        ),
    }


def disjoint_branches_of[M: models.Model](
    rows: models.QuerySet[M],
) -> list[models.QuerySet[M]] | None:
    """`branches_of(rows)` made disjoint, for counting them: the last branch first, each of the
    others without the rows of those before it, so that their counts add up to the rows of
    `rows` (no UNION to find the rows of two). The first branch of a scope is one's own rows, a
    few beside a led tenant's: it is the one read without the others, by their tenant. None
    where `rows` has no branches."""
    split = branches_of(rows)
    if split is None:
        return None
    branches: tuple[models.Q, ...] = rows._branches  # type: ignore[attr-defined]
    disjoint = []
    earlier: models.Q | None = None
    for branch, alone in zip(reversed(branches), reversed(split), strict=True):
        disjoint.append(alone if earlier is None else alone.exclude(earlier))
        earlier = branch if earlier is None else earlier | branch
    return disjoint
