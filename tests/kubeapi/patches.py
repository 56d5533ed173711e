"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain dicts.

A strategic merge patch is applied as a merge patch: the emulator knows no patch strategies
(list merge keys, `$patch` directives), so a list in a strategic merge patch replaces the
stored list instead of being merged into it by key.
"""

import copy
from collections.abc import Callable
from typing import Any


class PatchError(Exception):
    """The patch does not apply to the object (answered with 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer: {path!r}")
    if not path:
        return []
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise PatchError(f"index {index} is out of bounds in {path}")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    current = doc
    for token in tokens[:-1]:
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(current, token, path, adding=False)]
        else:
            raise PatchError(f"doc is missing path: {path}")
    return current


def _get(doc: Any, path: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, adding=False)]
    raise PatchError(f"doc is missing path: {path}")


def _add(doc: Any, path: Any, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, adding=True), value)
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: Any) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens, path), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, adding=False))
    raise PatchError(f"remove operation does not apply: doc is missing path: {path!r}")


def _replace(doc: Any, operation: dict[str, Any]) -> Any:
    path = operation["path"]
    try:
        _get(doc, path)
    except PatchError:
        raise PatchError(f"replace operation does not apply: doc is missing key: {path}") from None
    if _pointer(path):
        doc, _ = _remove(doc, path)
    return _add(doc, path, copy.deepcopy(operation.get("value")))


def _move(doc: Any, operation: dict[str, Any]) -> Any:
    doc, value = _remove(doc, operation.get("from"))
    return _add(doc, operation["path"], value)


def _test(doc: Any, operation: dict[str, Any]) -> Any:
    path = operation["path"]
    try:
        current = _get(doc, path)
    except PatchError:
        current = _MISSING
    if current != operation.get("value"):
        raise PatchError(f"testing value {path} failed: test failed")
    return doc


_MISSING = object()

_OPERATIONS: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "add": lambda doc, op: _add(doc, op["path"], copy.deepcopy(op.get("value"))),
    "remove": lambda doc, op: _remove(doc, op["path"])[0],
    "replace": _replace,
    "move": _move,
    "copy": lambda doc, op: _add(doc, op["path"], copy.deepcopy(_get(doc, op.get("from")))),
    "test": _test,
}


def json_patch(doc: Any, operations: Any) -> Any:
    """`doc` with the operations applied, all or nothing (the input is not modified)."""
    if not isinstance(operations, list):
        raise TypeError("a JSON patch is a list of operations")
    result = copy.deepcopy(doc)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"invalid JSON patch operation: {operation!r}")
        apply = _OPERATIONS.get(operation["op"])
        if apply is None:
            raise PatchError(f"Unexpected kind: {operation['op']}")
        result = apply(result, operation)
    return result
