from django.core.validators import RegexValidator

# Slugs become parts of Kubernetes names (`t-<slug>`), so they are DNS-1123 labels.
slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,59}[a-z0-9])?$",
    "Use 1 to 61 lowercase letters, digits and hyphens; start and end with a letter or digit.",
)
