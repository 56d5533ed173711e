from fractions import Fraction

from django import template

from portal.catalog.gpu_eq import gpu_eq_display

register = template.Library()


@register.filter(name="gpu_eq")
def gpu_eq_filter(value: Fraction) -> str:
    """A GPU-eq rounded for people (the exact value is in the title where it matters)."""
    return gpu_eq_display(value)
