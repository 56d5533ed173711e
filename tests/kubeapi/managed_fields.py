"""Field ownership (`metadata.managedFields`) and server-side apply, in a simplified model.

Each writer (field manager) owns a set of field paths. A path leads through maps to a leaf: a
scalar, a list or an empty map. Lists are atomic: whoever sets a list owns all of it (a real
server merges associative lists such as `containers` by their key instead). `apiVersion`,
`kind`, the server-set metadata (name, namespace, uid, resourceVersion, ...) and `status` are
not tracked.

- A create, update or non-apply patch makes its manager (the `fieldManager` parameter, else
  the User-Agent's product, as the API server does) owner of the paths it changed, with
  operation `Update`, and takes them away from everyone else.
- An apply sets the paths of the applied configuration; the paths this manager applied before
  and no longer applies are removed from the object unless another manager owns them; values
  set by others stay unless this apply sets them. Setting a path to a value other than the live
  one while another manager owns it is a conflict (409) unless `force` is given, which takes
  the path over.

Ownership is recorded on the object in the real wire format (`fieldsType: FieldsV1`,
`f:<field>` keys), so it can be read back from stored objects.
"""

import copy
from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi.patches import merge_patch

Path = tuple[str, ...]

UNTRACKED = frozenset({"apiVersion", "kind", "status"})
SERVER_METADATA = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


def tracked(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The part of an object whose fields have owners."""
    if not obj:
        return {}
    result = {key: value for key, value in obj.items() if key not in UNTRACKED}
    metadata = result.get("metadata")
    if isinstance(metadata, dict):
        metadata = {key: value for key, value in metadata.items() if key not in SERVER_METADATA}
        if metadata:
            result["metadata"] = metadata
        else:
            del result["metadata"]
    cleaned: dict[str, Any] = _without_nulls(result)
    return cleaned


def leaf_paths(obj: dict[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, value in obj.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            paths |= leaf_paths(value, path)
        else:
            paths.add(path)
    return paths


_MISSING = object()


def lookup(obj: Any, path: Path) -> Any:
    """The value at `path`, or `_MISSING`."""
    current = obj
    for key in path:
        if not isinstance(current, dict) or key not in current:
            return _MISSING
        current = current[key]
    return current


def _set(obj: dict[str, Any], path: Path, value: Any) -> None:
    current = obj
    for key in path[:-1]:
        if not isinstance(current.get(key), dict):
            current[key] = {}
        current = current[key]
    current[path[-1]] = value


def _delete(obj: dict[str, Any], path: Path) -> None:
    parents: list[dict[str, Any]] = [obj]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    # Maps emptied by the removal go too (labels: {} after the last label), but not the
    # top-level ones such as metadata.
    for depth in range(len(path) - 1, 1, -1):
        if parents[depth]:
            break
        parents[depth - 1].pop(path[depth - 1], None)


def _covers(path: Path, other: Path) -> bool:
    """`other` is `path` or lies under it."""
    return other[: len(path)] == path


def encode(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    # A path that is owned and also has owned children is marked with ".".
    for path in paths:
        node = root
        for key in path:
            node = node[f"f:{key}"]
        if any(key != "." for key in node):
            node["."] = {}
    return root


def decode(fields: Any, prefix: Path = ()) -> set[Path]:
    if not isinstance(fields, dict) or not fields:
        return {prefix} if prefix else set()
    paths: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            paths.add(prefix)
        elif key.startswith("f:"):
            paths |= decode(child, (*prefix, key[2:]))
        elif prefix:
            # k:, v: and i: keys address list elements; lists are atomic here.
            paths.add(prefix)
    return paths


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    paths: set[Path] = field(default_factory=set)
    subresource: str | None = None

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode(self.paths),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def entries(obj: dict[str, Any] | None) -> list[Entry]:
    managed = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return [
        Entry(
            manager=str(item.get("manager", "")),
            operation=str(item.get("operation", "Update")),
            api_version=str(item.get("apiVersion", "")),
            time=str(item.get("time", "")),
            paths=decode(item.get("fieldsV1")),
            subresource=item.get("subresource"),
        )
        for item in managed
        if isinstance(item, dict)
    ]


def _store(obj: dict[str, Any], owned: list[Entry], applier: Entry | None = None) -> None:
    # Managers left without fields are dropped, except the one applying now: an apply of
    # nothing but the name still records who manages the object.
    managed = [entry.as_dict() for entry in owned if entry.paths or entry is applier]
    if managed:
        obj.setdefault("metadata", {})["managedFields"] = managed
    else:
        obj.setdefault("metadata", {}).pop("managedFields", None)


def record_update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, api_version: str, now: str
) -> None:
    """Give `manager` the fields that `new` changed from `old`, in `new`'s managedFields."""
    before, after = tracked(old), tracked(new)
    changed = {path for path in leaf_paths(after) if lookup(before, path) != lookup(after, path)}
    removed = {path for path in leaf_paths(before) if lookup(after, path) is _MISSING}
    owned = entries(old)
    mine = next((e for e in owned if e.manager == manager and e.operation == "Update"), None)
    for entry in owned:
        if entry is not mine:
            entry.paths -= changed | removed
    if mine is None:
        mine = Entry(manager, "Update", api_version, now)
        owned.append(mine)
    if changed or removed:
        mine.paths = (mine.paths - removed) | changed
        mine.time = now
    _store(new, owned)


@dataclass(frozen=True)
class ApplyConflict:
    path: Path
    managers: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return "." + ".".join(self.path)


class ApplyConflictError(Exception):
    def __init__(self, conflicts: list[ApplyConflict], api_version: str) -> None:
        self.conflicts = conflicts
        by_manager: dict[str, list[str]] = {}
        for conflict in conflicts:
            for manager in conflict.managers:
                by_manager.setdefault(manager, []).append(conflict.dotted)
        parts = []
        for manager, paths in by_manager.items():
            if len(paths) == 1:
                parts.append(f'conflict with "{manager}" using {api_version}: {paths[0]}')
            else:
                listed = "".join(f"\n- {path}" for path in paths)
                parts.append(f'conflicts with "{manager}" using {api_version}:{listed}')
        count = len(conflicts)
        plural = "conflict" if count == 1 else "conflicts"
        super().__init__(f"Apply failed with {count} {plural}: " + "\n".join(parts))
        self.causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{manager}" using {api_version}',
                "field": conflict.dotted,
            }
            for conflict in conflicts
            for manager in conflict.managers
        ]


def apply(
    live: dict[str, Any],
    applied: dict[str, Any],
    manager: str,
    api_version: str,
    now: str,
    *,
    force: bool,
) -> dict[str, Any]:
    """The object after `manager` applies `applied` to `live` (which is not modified)."""
    config = tracked(applied)
    wanted_paths = leaf_paths(config)
    live_fields = tracked(live)
    owned = entries(live)
    mine = next((e for e in owned if e.manager == manager and e.operation == "Apply"), None)
    others = [entry for entry in owned if entry is not mine]

    def unchanged(path: Path) -> bool:
        current, wanted = lookup(live_fields, path), lookup(config, path)
        # An empty map in the configuration claims the map, not its contents.
        return current == wanted or (wanted == {} and isinstance(current, dict))

    changing = {path for path in wanted_paths if not unchanged(path)}
    conflicts = []
    for path in sorted(changing):
        owners = tuple(
            sorted({e.manager for e in others if any(_covers(path, p) for p in e.paths)})
        )
        if owners:
            conflicts.append(ApplyConflict(path, owners))
    if conflicts and not force:
        raise ApplyConflictError(conflicts, api_version)

    result = copy.deepcopy(live)
    previous = mine.paths if mine else set()
    for path in previous - wanted_paths:
        still_wanted = any(_covers(path, p) for p in wanted_paths)
        owned_by_others = any(_covers(path, p) for e in others for p in e.paths)
        if not still_wanted and not owned_by_others:
            _delete(result, path)
    for path in changing:
        _set(result, path, copy.deepcopy(lookup(config, path)))
    if isinstance(applied.get("status"), dict):
        result["status"] = merge_patch(result.get("status"), applied["status"])

    for entry in others:
        entry.paths = {p for p in entry.paths if not any(_covers(path, p) for path in changing)}
    if mine is None:
        mine = Entry(manager, "Apply", api_version, now)
        owned.insert(0, mine)
    if mine.paths != wanted_paths or tracked(result) != live_fields:
        mine.paths = set(wanted_paths)
        mine.time = now
    _store(result, owned, mine)
    return result
