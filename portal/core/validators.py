from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

# Slugs become parts of Kubernetes names (`t-<slug>`), so they are DNS-1123 labels.
slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,59}[a-z0-9])?$",
    "Use 1 to 61 lowercase letters, digits and hyphens; start and end with a letter or digit.",
)


def model_problems(instance: models.Model, **full_clean: Any) -> dict[str, list[str]]:
    """What `instance.full_clean(**full_clean)` finds wrong, field by field (empty: nothing)."""
    try:
        instance.full_clean(**full_clean)
    except ValidationError as error:
        return {name: list(messages) for name, messages in error.message_dict.items()}
    return {}
