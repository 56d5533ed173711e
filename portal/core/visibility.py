"""Who may see which rows, as structure: one `visible_to(user)` per model, one `get_visible_or_404`.

A model whose rows not everyone may see uses `VisibleQuerySet` as its default manager
(`objects = VisibleQuerySet.as_manager()`); the app that knows the rules registers the model's
scope, a function `(queryset, user) -> queryset` that narrows it to what the user may see. Core
knows no domain app: the tenants app registers the scope of core's `AuditEvent` like its own.
A model with no scope registered refuses `visible_to` rather than show everything.
"""

from collections.abc import Callable
from typing import Any, Self

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import models
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
        raise NotFound(
            gettext("There is no %(what)s %(key)s.")
            % {
                "what": queryset.model._meta.verbose_name,
                "key": " ".join(
                    repr(value) if isinstance(value, str) else str(value)
                    for value in lookup.values()
                ),
            }
        )
    return found
