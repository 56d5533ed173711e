"""Validation of the Kubernetes names and quantities that offerings carry.

The rules are Kubernetes' own (apimachinery's validation): extended resource names are
domain-prefixed qualified names outside kubernetes.io; pods may request extended resources
only in whole units; label keys and values follow the qualified-name and label-value rules.
"""

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(\d+(\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _qualified_name_problem(name: str, *, prefix_required: bool) -> str | None:
    prefix, slash, part = name.rpartition("/")
    if not slash:
        if prefix_required:
            return _("%(name)s needs a domain prefix, like example.com/%(bare)s") % {
                "name": repr(name),
                "bare": name,
            }
        part = name
    elif not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
        return _("%(prefix)s is not a valid DNS subdomain prefix") % {"prefix": repr(prefix)}
    if not part or len(part) > 63 or not _NAME_PART.match(part):
        return _(
            "%(part)s must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        ) % {"part": repr(part)}
    return None


def extended_resource_name_problem(name: str) -> str | None:
    """Why `name` is not a valid Kubernetes extended resource name, or None."""
    problem = _qualified_name_problem(name, prefix_required=True)
    if problem:
        return problem
    domain = name.rpartition("/")[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return _("%(name)s is in the kubernetes.io domain, which is reserved") % {
            "name": repr(name)
        }
    return None


def quantity_parse(text: str) -> Decimal:
    """A Kubernetes quantity (`1`, `500m`, `10Gi`, `1e3`) as an exact Decimal."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            _("%(text)s is not a Kubernetes quantity (like 1, 500m or 10Gi)") % {"text": repr(text)}
        )
    try:
        number = Decimal(match["number"])
    except InvalidOperation:
        raise ValueError(
            _("%(text)s is not a Kubernetes quantity") % {"text": repr(text)}
        ) from None
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    if suffix:
        return number.scaleb(int(suffix[1:]))
    return number


def validate_resources(value: Any) -> None:
    """`{extended resource name: quantity}`, at least one, each a positive whole number."""
    if not isinstance(value, dict) or not value:
        raise ValidationError(_("Give at least one resource as {name: quantity}."))
    problems = []
    for name, quantity in value.items():
        problem = extended_resource_name_problem(str(name))
        if problem:
            problems.append(_("resource name %(problem)s") % {"problem": problem})
            continue
        try:
            amount = quantity_parse(str(quantity))
        except ValueError as error:
            problems.append(f"{name}: {error}")
            continue
        if amount <= 0 or amount != amount.to_integral_value():
            problems.append(
                _("%(name)s: extended resources are requested in whole units, not %(quantity)s")
                % {"name": name, "quantity": quantity}
            )
    if problems:
        raise ValidationError(problems)


def validate_annotations(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(_("Give annotations as {key: value}."))
    problems = []
    for key, text in value.items():
        problem = _qualified_name_problem(str(key), prefix_required=False)
        if problem:
            problems.append(_("annotation key %(problem)s") % {"problem": problem})
        if not isinstance(text, str):
            problems.append(_("annotation %(key)s: the value must be text") % {"key": key})
    if problems:
        raise ValidationError(problems)


def validate_label_key(value: str) -> None:
    problem = _qualified_name_problem(value, prefix_required=False)
    if problem:
        raise ValidationError(_("Not a valid label key: %(problem)s.") % {"problem": problem})


def validate_label_value(value: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValidationError(
            _(
                "Not a valid label value: at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit."
            )
        )
