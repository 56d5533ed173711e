"""Label and field selectors, parsed and matched like apimachinery's `labels` and `fields`.

Label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a)`, `k>1`, `k<1`,
joined by commas. Field selectors: `field=v`, `field==v`, `field!=v`, joined by commas, over the
fields the API server supports for the kind (`metadata.name` and `metadata.namespace` for all).
A malformed selector raises `ValueError`, which the server answers with 400 BadRequest.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.validation import label_key_errors, label_value_errors

_TOKEN = re.compile(r"\s*(==|!=|=|!|,|\(|\)|<|>|[^\s,()=!<>]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.operator:
            case "exists":
                return present
            case "!":
                return not present
            case "=" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case "gt" | "lt":
                try:
                    number, bound = int(value or ""), int(self.values[0])
                except ValueError:
                    return False
                return number > bound if self.operator == "gt" else number < bound
        raise AssertionError(self.operator)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            raise ValueError(f"unable to parse requirement: unexpected {text[position:]!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _check_key(key: str) -> None:
    if errors := label_key_errors(key):
        raise ValueError(f"unable to parse requirement: invalid label key {key!r}: {errors[0]}")


def _check_value(value: str) -> None:
    if errors := label_value_errors(value):
        raise ValueError(
            f"unable to parse requirement: invalid label value: {value!r}: {errors[0]}"
        )


class _LabelSelectorParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError(f"unable to parse requirement: selector {self.text!r} ends too early")
        self.position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while self.peek() is not None:
            requirements.append(self.requirement())
            separator = self.peek()
            if separator is not None:
                if separator != ",":
                    raise ValueError(f"unable to parse requirement: expected ',' not {separator!r}")
                self.take()
        return requirements

    def requirement(self) -> Requirement:
        token = self.take()
        if token == "!":
            key = self.take()
            _check_key(key)
            return Requirement(key, "!")
        key = token
        _check_key(key)
        operator = self.peek()
        if operator in (None, ","):
            return Requirement(key, "exists")
        self.take()
        if operator in ("=", "==", "!="):
            value = "" if self.peek() in (None, ",") else self.take()
            _check_value(value)
            return Requirement(key, "!=" if operator == "!=" else "=", (value,))
        if operator in ("in", "notin"):
            return Requirement(key, operator, self.value_set(operator))
        if operator in (">", "<"):
            bound = self.take()
            if not re.fullmatch(r"-?\d+", bound):
                raise ValueError(
                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                    f"an integer, not {bound!r}"
                )
            return Requirement(key, "gt" if operator == ">" else "lt", (bound,))
        raise ValueError(f"unable to parse requirement: unexpected {operator!r} after {key!r}")

    def value_set(self, operator: str) -> tuple[str, ...]:
        if self.take() != "(":
            raise ValueError(f"unable to parse requirement: expected '(' after {operator}")
        values: list[str] = []
        while (value := self.take()) != ")":
            if value != ",":
                _check_value(value)
                values.append(value)
        if not values:
            raise ValueError(
                "unable to parse requirement: for 'in', 'notin' operators, "
                "values set can't be empty"
            )
        return tuple(values)


def parse_label_selector(text: str) -> list[Requirement]:
    return _LabelSelectorParser(text).parse()


def labels_match(requirements: list[Requirement], obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(requirement.matches(labels) for requirement in requirements)


# Field selectors.


def _dotted(path: str) -> Callable[[Mapping[str, Any]], str]:
    def value(obj: Mapping[str, Any]) -> str:
        current: Any = obj
        for part in path.split("."):
            if not isinstance(current, Mapping):
                return ""
            current = current.get(part)
        if current is None:
            return ""
        if isinstance(current, bool):
            return "true" if current else "false"
        return str(current)

    return value


_COMMON_FIELDS = ("metadata.name", "metadata.namespace")

# The fields the API server indexes per kind (a selection of what it really supports).
FIELDS: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "namespaces": ("status.phase",),
    "nodes": ("spec.unschedulable",),
    "secrets": ("type",),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
}


# Field labels that name another field of the object (the API server's field sets).
_FIELD_PATHS = {"source": "source.component"}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        value = _dotted(_FIELD_PATHS.get(self.field, self.field))(obj)
        return (value == self.value) == self.equal


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in text:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            current += char
            escaped = True
        elif char == separator:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(text: str, plural: str) -> list[FieldRequirement]:
    supported = _COMMON_FIELDS + FIELDS.get(plural, ())
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)(.*)", term)
        if not match:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, value = match.groups()
        if field not in supported:
            raise ValueError(f"field label not supported: {field}")
        requirements.append(FieldRequirement(field, operator != "!=", _unescape(value)))
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    return all(requirement.matches(obj) for requirement in requirements)
