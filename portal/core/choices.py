"""A choice field's label, read as cheaply as the value: for lists that show one per row.

Django's `get_FOO_display()` builds a dict of the field's choices on every call, hashing each
label; a lazily translated label is translated to be hashed. A list of 50 requests showing
their state translated some 400 labels to show 50. `ChoiceLabel` maps the values to their
labels once per model and translates only the label shown, in the active language.
"""

from typing import Any, Self, overload

from django.db import models
from django.utils.encoding import force_str


class ChoiceLabel:
    """`label = ChoiceLabel("state")` on a model: `instance.label` is what
    `instance.get_state_display()` gives (the value itself when it is not a choice)."""

    def __init__(self, field_name: str) -> None:
        self.field_name = field_name
        self._labels: dict[Any, Any] | None = None

    @overload
    def __get__(self, instance: None, owner: type[models.Model]) -> Self: ...

    @overload
    def __get__(self, instance: models.Model, owner: type[models.Model]) -> str: ...

    def __get__(self, instance: models.Model | None, owner: type[models.Model]) -> "Self | str":
        if instance is None:
            return self
        labels = self._labels
        if labels is None:
            field = owner._meta.get_field(self.field_name)
            labels = self._labels = dict(field.flatchoices)  # type: ignore[union-attr]
        value = getattr(instance, self.field_name)
        return force_str(labels.get(value, value))
