"""Validation of stored objects: the OpenAPI schema plus the checks the schema cannot express.

The schema check is kubernetes-validate in strict mode (unknown fields are errors) for
`KUBERNETES_VERSION`. On top of it, like the API server: metadata.name (DNS-1123 label or
subdomain, DNS-1035 label, or path segment, by kind), label keys and values, annotation keys,
quantities in container resources and ResourceQuota, and the rules for extended resources
(whole numbers, requests equal to limits) and for requests not above limits.

Not checked (a real server would): immutability of fields after creation (pod specs, selectors,
...), cross-field rules such as a Deployment's selector matching its template, and the many
per-kind semantic rules beyond those listed.
"""

import functools
import re
from decimal import Decimal
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
from kubernetes.utils.quantity import parse_quantity

from tests.kubeapi.errors import Cause, invalid_object
from tests.kubeapi.resources import KUBERNETES_VERSION, ResourceType

# kubernetes-validate reads and parses a kind's JSON schema (and the definitions, megabytes)
# from disk again for every object it validates: about 18 of the 20 ms an apply costs. The
# files never change while the emulator runs, so each is read once.
for _name in ("schema_contents", "all_versions"):
    setattr(
        kubernetes_validate.utils,
        _name,
        functools.cache(getattr(kubernetes_validate.utils, _name)),
    )

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
QUALIFIED_KEY_MESSAGE = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character with an optional DNS subdomain prefix and '/' "
    "(e.g. 'example.com/MyName')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
QUANTITY_MESSAGE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def name_errors(name: str, rule: str) -> list[str]:
    """What is wrong with metadata.name under the kind's naming rule (empty when valid)."""
    if rule == "path":
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{char}'" for char in ("/", "%") if char in name]
    if rule == "label":
        errors = [] if _DNS1123_LABEL.fullmatch(name) else [LABEL_MESSAGE]
        limit = 63
    elif rule == "dns1035":
        errors = [] if _DNS1035_LABEL.fullmatch(name) else [DNS1035_MESSAGE]
        limit = 63
    else:
        errors = [] if _DNS1123_SUBDOMAIN.fullmatch(name) else [SUBDOMAIN_MESSAGE]
        limit = 253
    if len(name) > limit:
        errors.insert(0, f"must be no more than {limit} characters")
    return errors


def label_key_errors(key: str) -> list[str]:
    """Errors of a qualified name (`prefix/name` or `name`), as label and annotation keys."""
    parts = key.split("/")
    if len(parts) > 2:
        return [QUALIFIED_KEY_MESSAGE]
    errors: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {error}" for error in name_errors(prefix, "subdomain"))
    if not name:
        errors.append("name part must be non-empty")
    elif not _QUALIFIED_NAME.fullmatch(name):
        errors.append(QUALIFIED_NAME_MESSAGE)
    if len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = [] if _LABEL_VALUE.fullmatch(value) else [LABEL_VALUE_MESSAGE]
    if len(value) > 63:
        errors.insert(0, "must be no more than 63 characters")
    return errors


def quantity_errors(value: Any) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return [QUANTITY_MESSAGE]
    if isinstance(value, str) and not _QUANTITY.fullmatch(value):
        return [QUANTITY_MESSAGE]
    try:
        parse_quantity(value)
    except ValueError:
        return [QUANTITY_MESSAGE]
    return []


def is_extended_resource(name: str) -> bool:
    """Extended resources are domain-prefixed names outside kubernetes.io (nvidia.com/gpu)."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _metadata_causes(rt: ResourceType, metadata: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    name = metadata.get("name")
    if not name:
        causes.append(Cause.required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(
            Cause.invalid("metadata.name", name, error) for error in name_errors(name, rt.name_rule)
        )
    labels = metadata.get("labels") or {}
    if isinstance(labels, dict):
        for key, value in labels.items():
            causes.extend(
                Cause.invalid("metadata.labels", key, error) for error in label_key_errors(key)
            )
            if isinstance(value, str):
                causes.extend(
                    Cause.invalid(f"metadata.labels[{key}]", value, error)
                    for error in label_value_errors(value)
                )
    annotations = metadata.get("annotations") or {}
    if isinstance(annotations, dict):
        for key in annotations:
            causes.extend(
                Cause.invalid("metadata.annotations", key, error) for error in label_key_errors(key)
            )
    return causes


def _container_causes(field: str, container: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        return causes
    parsed: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for section in ("requests", "limits"):
        values = resources.get(section) or {}
        if not isinstance(values, dict):
            continue
        for resource, value in values.items():
            path = f"{field}.resources.{section}[{resource}]"
            if errors := quantity_errors(value):
                causes.extend(Cause.invalid(path, value, error) for error in errors)
                continue
            quantity = parse_quantity(value)
            if quantity < 0:
                causes.append(Cause.invalid(path, value, "must be greater than or equal to 0"))
            if is_extended_resource(resource) and quantity != quantity.to_integral_value():
                causes.append(Cause.invalid(path, value, "must be an integer"))
            parsed[section][resource] = quantity
    requests, limits = parsed["requests"], parsed["limits"]
    for resource, request in requests.items():
        limit = limits.get(resource)
        path = f"{field}.resources.requests"
        if is_extended_resource(resource):
            if limit is None:
                causes.append(
                    Cause.required(
                        f"{field}.resources.limits",
                        "Limit must be set for non overcommitable resources",
                    )
                )
            elif limit != request:
                causes.append(
                    Cause.invalid(
                        path,
                        resources["requests"][resource],
                        f"must be equal to {resource} limit of {resources['limits'][resource]}",
                    )
                )
        elif limit is not None and request > limit:
            causes.append(
                Cause.invalid(
                    f"{field}.resources.requests",
                    resources["requests"][resource],
                    f"must be less than or equal to {resource} limit of "
                    f"{resources['limits'][resource]}",
                )
            )
    return causes


def _pod_spec_causes(field: str, spec: Any) -> list[Cause]:
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    for section in ("initContainers", "containers"):
        containers = spec.get(section) or []
        if isinstance(containers, list):
            for index, container in enumerate(containers):
                if isinstance(container, dict):
                    causes.extend(_container_causes(f"{field}.{section}[{index}]", container))
    return causes


def _semantic_causes(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec")
    if rt.kind == "Pod":
        return _pod_spec_causes("spec", spec)
    if rt.kind in ("Deployment", "StatefulSet") and isinstance(spec, dict):
        template = spec.get("template") or {}
        return _pod_spec_causes("spec.template.spec", template.get("spec"))
    if rt.kind == "ResourceQuota" and isinstance(spec, dict):
        hard = spec.get("hard") or {}
        return [
            Cause.invalid(f"spec.hard[{key}]", value, error)
            for key, value in (hard.items() if isinstance(hard, dict) else [])
            for error in quantity_errors(value)
        ]
    return []


def _field_path(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _schema_causes(obj: dict[str, Any]) -> list[Cause]:
    # Status is written by controllers through its own subresource on a real server, and
    # strict schemas make partial statuses awkward; it is stored but not validated.
    candidate = {key: value for key, value in obj.items() if key != "status"}
    try:
        kubernetes_validate.validate(candidate, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = list(error.path)
        if error.validator == "required":
            missing = re.search(r"'([^']+)' is a required property", error.message)
            field = _field_path([*path, missing.group(1)] if missing else path)
            return [Cause.required(field)]
        if error.validator == "additionalProperties":
            unknown = re.findall(r"'([^']+)'", error.message.split("(")[-1])
            return [
                Cause(
                    _field_path([*path, name]), "FieldValueInvalid", "field not declared in schema"
                )
                for name in unknown or ["?"]
            ]
        return [Cause.invalid(_field_path(path) or "<root>", error.instance, error.message)]
    return []


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Raise 422 Invalid naming the problems when `obj` may not be stored.

    Metadata is checked first, then the schema, then the rules beyond it; the first stage
    that finds problems reports them (a real server reports more of them at once).
    """
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        raise invalid_object(rt, "", [Cause.required("metadata")])
    causes = _metadata_causes(rt, metadata)
    if not causes:
        causes = _schema_causes(obj)
    if not causes:
        causes = _semantic_causes(rt, obj)
    if causes:
        raise invalid_object(rt, str(metadata.get("name") or ""), causes)
