"""The REST semantics of the API server, independent of HTTP: a request in, a response out.

Served: discovery; get, list (label and field selectors, limit/continue), create, replace,
patch (merge, strategic merge as merge, JSON patch, server-side apply), delete and
deletecollection on every resource in `resources.RESOURCE_TYPES`; the `status` subresource
where the kind has one; `pods/log`; `dryRun=All` on writes.

As on a real server: list items carry no apiVersion/kind; a write that changes nothing keeps
the resourceVersion; PUT and patches with a stale metadata.resourceVersion answer 409;
namespaced writes into a missing namespace answer 404 `namespaces "x" not found` (a get
answers the object's own 404, as a real server does); validation (422) comes before quota
admission (403), which comes before the AlreadyExists check (409).

Deliberately not emulated: watch (answered 400), tables, protobuf/CBOR, field validation
modes other than Strict, the immutability of fields after creation, graceful deletion and
finalizers (deletion is immediate; a deleted namespace takes everything in it at once),
and every controller: nothing happens by itself (no pods from Deployments or StatefulSets,
no scheduling, no garbage collection); `controllers.py` does it for StatefulSets and their
pods when a test asks. Status sent to the main resource is stored (a real server ignores it
there); a write without status keeps the stored one.
"""

import base64
import binascii
import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import yaml

from tests.kubeapi import errors, managed_fields, resources
from tests.kubeapi.errors import ApiError, Cause
from tests.kubeapi.patches import PatchError, json_patch, merge_patch
from tests.kubeapi.quota import exceeded_quota
from tests.kubeapi.resources import BY_PATH, NAMESPACES, PODS, ResourceType
from tests.kubeapi.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from tests.kubeapi.store import Store, now
from tests.kubeapi.validation import validate

JSON = "application/json"
YAML = "application/yaml"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)

# The namespaces a real API server refuses to delete.
PROTECTED_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})

# The random suffix alphabet of generateName (apimachinery's, without vowels and look-alikes).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str = ""  # the media type alone, lower case
    accept: str = ""
    user_agent: str = ""
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


def _status_success(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = {"name": obj["metadata"]["name"]}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details["uid"] = obj["metadata"].get("uid")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _not_served() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


def _decode(request: Request, *, allow_yaml: bool) -> Any:
    text = request.body.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError as json_error:
        if not allow_yaml:
            raise errors.bad_request(
                f"couldn't get version/kind; json parse error: {json_error}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as yaml_error:
        raise errors.bad_request(f"error decoding YAML: {yaml_error}") from None


def _object_body(request: Request) -> dict[str, Any]:
    if request.content_type not in ("", JSON, YAML):
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{JSON}, {YAML}, application/vnd.kubernetes.protobuf, application/cbor",
        )
    body = _decode(request, allow_yaml=request.content_type == YAML)
    if not isinstance(body, dict):
        raise errors.bad_request("the object provided is unrecognized (must be a JSON object)")
    return body


def _check_type(rt: ResourceType, body: dict[str, Any], *, required: bool = False) -> None:
    if required:
        for field_name in ("apiVersion", "kind"):
            if not body.get(field_name):
                raise errors.bad_request(f"{field_name} must be set in an applied configuration")
    api_version = body.setdefault("apiVersion", rt.api_version)
    kind = body.setdefault("kind", rt.kind)
    if api_version != rt.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({rt.api_version})"
        )
    if kind != rt.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    if not isinstance(body.get("metadata"), dict):
        body["metadata"] = {}


def _check_identity(
    rt: ResourceType, body: dict[str, Any], namespace: str | None, name: str
) -> None:
    metadata = body["metadata"]
    if metadata.get("name") != name:
        raise errors.bad_request(
            f"the name of the object ({metadata.get('name') or ''}) does not match the name on "
            f"the URL ({name})"
        )
    _check_namespace(rt, body, namespace)


def _check_namespace(rt: ResourceType, body: dict[str, Any], namespace: str | None) -> None:
    metadata = body["metadata"]
    if rt.namespaced:
        if metadata.get("namespace") and metadata["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        metadata["namespace"] = namespace
    else:
        metadata.pop("namespace", None)


def _flag(query: dict[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _number(query: dict[str, str], name: str) -> int:
    value = query.get(name) or "0"
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"{name}: invalid value {value!r}: not an integer") from None


class Api:
    def __init__(self, store: Store, server_address: str) -> None:
        self.store = store
        self.server_address = server_address

    def handle(self, request: Request) -> Response:
        try:
            return self._route(request)
        except ApiError as error:
            return self.error(error, request)

    def error(self, error: ApiError, request: Request) -> Response:
        return self._json(error.code, error.body(), request, headers=error.headers)

    # Encoding.

    @staticmethod
    def _json(
        status: int,
        document: Any,
        request: Request,
        headers: dict[str, str] | None = None,
    ) -> Response:
        accept = request.accept.lower()
        wants_yaml = "yaml" in accept and "json" not in accept and "*/*" not in accept
        if wants_yaml:
            body = yaml.safe_dump(document, sort_keys=False).encode()
            return Response(status, body, YAML, dict(headers or {}))
        return Response(status, json.dumps(document).encode(), JSON, dict(headers or {}))

    # Routing.

    def _route(self, request: Request) -> Response:
        parts = [unquote(part) for part in request.path.split("/") if part]
        accept = request.accept.lower()
        if accept and not any(media in accept for media in ("json", "yaml", "*/*", "text/")):
            raise ApiError(406, f"only the following media types are accepted: {JSON}, {YAML}")
        if len(parts) == 1 and parts[0] in ("healthz", "livez", "readyz"):
            return Response(200, b"ok", "text/plain")
        if not parts or parts[0] not in ("api", "apis", "version"):
            raise _not_served()
        is_discovery, document = self._discovery(parts)
        if is_discovery:
            if document is None:
                raise _not_served()
            if request.method != "GET":
                raise errors.method_not_allowed(request.method)
            return self._json(200, document, request)
        if parts[0] == "api":
            return self._resource(request, "", parts[1], parts[2:])
        return self._resource(request, parts[1], parts[2], parts[3:])

    def _discovery(self, parts: list[str]) -> tuple[bool, dict[str, Any] | None]:
        """Whether the path is a discovery document, and the document (None: not served)."""
        document: dict[str, Any] | None = None
        match parts:
            case ["version"]:
                document = resources.version_document()
            case ["api"]:
                document = resources.api_versions_document(self.server_address)
            case ["apis"]:
                document = resources.api_group_list_document()
            case ["api", version]:
                document = resources.api_resource_list_document("", version)
            case ["apis", group]:
                document = resources.api_group_document(group)
            case ["apis", group, version]:
                document = resources.api_resource_list_document(group, version)
            case ["version", *_]:
                pass
            case _:
                return False, None
        return True, document

    def _resource(self, request: Request, group: str, version: str, rest: list[str]) -> Response:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and (group, version, rest[2]) in BY_PATH:
            namespace, rest = rest[1], rest[2:]
        rt = BY_PATH.get((group, version, rest[0]))
        if rt is None or len(rest) > 3 or (namespace is not None and not rt.namespaced):
            raise _not_served()
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else None
        if subresource is not None and subresource not in rt.subresources:
            raise _not_served()
        target = "collection" if not name else subresource or "object"
        handlers: dict[tuple[str, str], Callable[[], Response]] = {
            ("collection", "GET"): lambda: self._list(request, rt, namespace),
            ("collection", "POST"): lambda: self._create(request, rt, namespace),
            ("collection", "DELETE"): lambda: self._delete_collection(request, rt, namespace),
            ("object", "GET"): lambda: self._get(request, rt, namespace, name),
            ("object", "PUT"): lambda: self._replace(request, rt, namespace, name),
            ("object", "PATCH"): lambda: self._patch(request, rt, namespace, name),
            ("object", "DELETE"): lambda: self._delete(request, rt, namespace, name),
            ("status", "GET"): lambda: self._get(request, rt, namespace, name),
            ("status", "PUT"): lambda: self._write_status(request, rt, namespace, name),
            ("status", "PATCH"): lambda: self._write_status(request, rt, namespace, name),
            ("log", "GET"): lambda: self._log(request, rt, namespace or "", name),
        }
        handler = handlers.get((target, request.method))
        if handler is None:
            raise errors.method_not_allowed(request.method)
        with self.store.lock:
            return handler()

    # Reads.

    def _existing(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.store.get(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt, name)
        return copy.deepcopy(obj)

    def _get(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        return self._json(200, self._existing(rt, namespace, name), request)

    def _selected(
        self, request: Request, rt: ResourceType, namespace: str | None
    ) -> list[dict[str, Any]]:
        try:
            label_selector = parse_label_selector(request.query.get("labelSelector", ""))
            field_selector = parse_field_selector(request.query.get("fieldSelector", ""), rt.plural)
        except ValueError as error:
            raise errors.bad_request(str(error)) from None
        return [
            obj
            for _, obj in self.store.find(rt, namespace)
            if labels_match(label_selector, obj) and fields_match(field_selector, obj)
        ]

    def _list(self, request: Request, rt: ResourceType, namespace: str | None) -> Response:
        if _flag(request.query, "watch"):
            raise errors.bad_request("watch is not supported by the Kubernetes API emulator")
        items = self._selected(request, rt, namespace)
        metadata: dict[str, Any] = {"resourceVersion": self.store.revision}
        start = 0
        if token := request.query.get("continue"):
            try:
                after = json.loads(base64.urlsafe_b64decode(token.encode()))
                start = next(
                    (
                        i
                        for i, obj in enumerate(items)
                        if [obj["metadata"].get("namespace", ""), obj["metadata"]["name"]] > after
                    ),
                    len(items),
                )
            except (ValueError, binascii.Error, TypeError):
                raise errors.bad_request("continue key is not valid") from None
        limit = _number(request.query, "limit")
        page = items[start : start + limit] if limit > 0 else items[start:]
        if limit > 0 and start + limit < len(items):
            last = page[-1]["metadata"]
            marker = json.dumps([last.get("namespace", ""), last["name"]])
            metadata["continue"] = base64.urlsafe_b64encode(marker.encode()).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        document = {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": metadata,
            # Items of a built-in list carry no apiVersion and kind on a real server.
            "items": [
                {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("apiVersion", "kind")}
                for obj in page
            ],
        }
        return self._json(200, document, request)

    def _log(self, request: Request, rt: ResourceType, namespace: str, name: str) -> Response:
        pod = self._existing(rt, namespace, name)
        spec = pod.get("spec") or {}
        containers = [c.get("name") for c in spec.get("containers") or []]
        every = containers + [c.get("name") for c in spec.get("initContainers") or []]
        container = request.query.get("container")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(str(c) for c in containers)}]"
                )
            container = str(containers[0])
        elif container not in every:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        logs = self.store.pod_logs
        text = logs.get((namespace, name, container)) or logs.get(
            (namespace, name, ""),
            f"emulated log of container {container} in pod {namespace}/{name}\n",
        )
        if "tailLines" in request.query:
            tail = _number(request.query, "tailLines")
            text = "".join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ""
        return Response(200, text.encode(), "text/plain")

    # Writes.

    @staticmethod
    def _manager(request: Request) -> str:
        # As the API server: the fieldManager parameter, else the User-Agent's product.
        return request.query.get("fieldManager") or request.user_agent.split("/")[0] or "unknown"

    def _require_namespace(self, rt: ResourceType, namespace: str | None) -> None:
        if rt.namespaced and not self.store.namespace_exists(namespace or ""):
            raise errors.not_found(NAMESPACES, namespace or "")

    def _admit(self, rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if rt is not PODS:
            return
        namespace = new["metadata"]["namespace"]
        why = exceeded_quota(self.store.quotas(namespace), self.store.usage(namespace), old, new)
        if why:
            raise errors.forbidden(rt, new["metadata"]["name"], why)

    def _store(
        self,
        request: Request,
        rt: ResourceType,
        old: dict[str, Any] | None,
        new: dict[str, Any],
    ) -> tuple[int, dict[str, Any]]:
        """Validate, admit and store `new` (replacing `old`); the answer's status and object."""
        new = self.store.normalize(rt, new)
        if old is not None:
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return 200, copy.deepcopy(old)
        validate(rt, new)
        self._admit(rt, old, new)
        name = new["metadata"]["name"]
        if old is None and self.store.get(rt, new["metadata"].get("namespace"), name):
            raise errors.already_exists(rt, name)
        status = 201 if old is None else 200
        if request.query.get("dryRun") == "All":
            new["metadata"].pop("resourceVersion", None)
            return status, new
        return status, self.store.save(rt, new)

    def _create(self, request: Request, rt: ResourceType, namespace: str | None) -> Response:
        body = _object_body(request)
        _check_type(rt, body)
        _check_namespace(rt, body, namespace)
        metadata = body["metadata"]
        if metadata.get("resourceVersion"):
            raise errors.internal_error(
                "resourceVersion should not be set on objects to be created"
            )
        if not metadata.get("name") and metadata.get("generateName"):
            suffix = "".join(random.choices(_NAME_ALPHABET, k=5))
            metadata["name"] = f"{metadata['generateName']}{suffix}"
        self._require_namespace(rt, namespace)
        self.store.fill_system_metadata(rt, body, namespace)
        self.store.apply_create_defaults(rt, body)
        managed_fields.record_update(None, body, self._manager(request), rt.api_version, now())
        status, stored = self._store(request, rt, None, body)
        return self._json(status, stored, request)

    def _preconditions(
        self, rt: ResourceType, old: dict[str, Any], resource_version: Any, uid: Any
    ) -> None:
        name, current = old["metadata"]["name"], old["metadata"]
        if resource_version and str(resource_version) != current["resourceVersion"]:
            raise errors.conflict(rt, name)
        if uid and uid != current.get("uid"):
            raise errors.conflict(
                rt,
                name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {current.get('uid')}",
            )

    def _update(
        self, request: Request, rt: ResourceType, old: dict[str, Any], new: dict[str, Any]
    ) -> Response:
        """Store `new` over `old` (a PUT or a non-apply patch)."""
        metadata, previous = new["metadata"], old["metadata"]
        self._preconditions(rt, old, metadata.get("resourceVersion"), metadata.get("uid"))
        for server_field in ("uid", "creationTimestamp", "resourceVersion"):
            metadata[server_field] = previous.get(server_field)
        metadata.pop("managedFields", None)
        if "managedFields" in previous:
            metadata["managedFields"] = copy.deepcopy(previous["managedFields"])
        if "status" not in new and "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        managed_fields.record_update(old, new, self._manager(request), rt.api_version, now())
        status, stored = self._store(request, rt, old, new)
        return self._json(status, stored, request)

    def _replace(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        body = _object_body(request)
        _check_type(rt, body)
        _check_identity(rt, body, namespace, name)
        return self._update(request, rt, self._existing(rt, namespace, name), body)

    def _patched(self, request: Request, rt: ResourceType, old: dict[str, Any]) -> dict[str, Any]:
        """`old` with a merge, strategic merge or JSON patch applied."""
        document = _decode(request, allow_yaml=False)
        try:
            if request.content_type == JSON_PATCH:
                if not isinstance(document, list):
                    raise errors.bad_request("a JSON patch document must be a list of operations")
                patched = json_patch(old, document)
            else:
                if not isinstance(document, dict):
                    raise errors.bad_request("a merge patch must be a JSON object")
                patched = merge_patch(old, document)
        except PatchError as error:
            raise ApiError(422, str(error)) from None
        if not isinstance(patched, dict):
            raise ApiError(422, "the patched document is not an object")
        return patched

    def _patch_type(self, request: Request) -> str:
        if request.content_type not in PATCH_TYPES:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES)}",
            )
        if request.content_type != APPLY_PATCH and "force" in request.query:
            raise errors.invalid(
                "PatchOptions",
                "",
                [Cause.forbidden("force", "may not be specified for non-apply patch")],
                group="meta.k8s.io",
            )
        return request.content_type

    def _patch(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        if self._patch_type(request) == APPLY_PATCH:
            return self._apply(request, rt, namespace, name)
        old = self._existing(rt, namespace, name)
        patched = self._patched(request, rt, old)
        _check_type(rt, patched)
        _check_identity(rt, patched, namespace, name)
        return self._update(request, rt, old, patched)

    def _apply(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        manager = request.query.get("fieldManager")
        if not manager:
            raise errors.invalid(
                "PatchOptions",
                "",
                [Cause.required("fieldManager", "is required for apply patch")],
                group="meta.k8s.io",
            )
        body = _decode(request, allow_yaml=True)
        if not isinstance(body, dict):
            raise errors.bad_request("an applied configuration must be an object")
        _check_type(rt, body, required=True)
        _check_identity(rt, body, namespace, name)
        old = self.store.get(rt, namespace, name)
        timestamp = now()
        if old is None:
            self._require_namespace(rt, namespace)
            base: dict[str, Any] = {"metadata": {"name": name}}
            self.store.fill_system_metadata(rt, base, namespace)
            new = managed_fields.apply(base, body, manager, rt.api_version, timestamp, force=True)
            self.store.apply_create_defaults(rt, new)
        else:
            old = copy.deepcopy(old)
            self._preconditions(
                rt, old, body["metadata"].get("resourceVersion"), body["metadata"].get("uid")
            )
            try:
                new = managed_fields.apply(
                    old,
                    body,
                    manager,
                    rt.api_version,
                    timestamp,
                    force=_flag(request.query, "force"),
                )
            except managed_fields.ApplyConflictError as conflict:
                raise ApiError(
                    409,
                    str(conflict),
                    details={"causes": conflict.causes},
                ) from None
        status, stored = self._store(request, rt, old, new)
        return self._json(status, stored, request)

    def _write_status(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        old = self._existing(rt, namespace, name)
        if request.method == "PUT":
            body = _object_body(request)
            _check_type(rt, body)
            _check_identity(rt, body, namespace, name)
        elif self._patch_type(request) == APPLY_PATCH:
            applied = _decode(request, allow_yaml=True)
            if not isinstance(applied, dict):
                raise errors.bad_request("an applied configuration must be an object")
            body = merge_patch(old, applied)
        else:
            body = self._patched(request, rt, old)
        self._preconditions(rt, old, (body.get("metadata") or {}).get("resourceVersion"), None)
        new = copy.deepcopy(old)
        if isinstance(body.get("status"), dict):
            new["status"] = body["status"]
        else:
            new.pop("status", None)
        status, stored = self._store(request, rt, old, new)
        return self._json(status, stored, request)

    # Deletion.

    def _delete_options(self, request: Request) -> dict[str, Any]:
        if not request.body.strip():
            return {}
        options = _decode(request, allow_yaml=False)
        return options if isinstance(options, dict) else {}

    def _remove(self, request: Request, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Delete `obj`; the answer a real server gives for it."""
        metadata = obj["metadata"]
        if rt is NAMESPACES and metadata["name"] in PROTECTED_NAMESPACES:
            raise errors.forbidden(rt, metadata["name"], "this namespace may not be deleted")
        if request.query.get("dryRun") == "All":
            deleted = copy.deepcopy(obj)
        else:
            deleted = self.store.remove(rt, metadata.get("namespace"), metadata["name"])
        if rt is NAMESPACES:
            deleted["metadata"]["deletionTimestamp"] = now()
            deleted.setdefault("status", {})["phase"] = "Terminating"
            return deleted
        if rt.returns_deleted_object:
            return deleted
        return _status_success(rt, deleted)

    def _delete(
        self, request: Request, rt: ResourceType, namespace: str | None, name: str
    ) -> Response:
        old = self._existing(rt, namespace, name)
        preconditions = self._delete_options(request).get("preconditions") or {}
        self._preconditions(rt, old, preconditions.get("resourceVersion"), preconditions.get("uid"))
        return self._json(200, self._remove(request, rt, old), request)

    def _delete_collection(
        self, request: Request, rt: ResourceType, namespace: str | None
    ) -> Response:
        deleted = [
            copy.deepcopy(obj)
            for obj in self._selected(request, rt, namespace)
            if not (rt is NAMESPACES and obj["metadata"]["name"] in PROTECTED_NAMESPACES)
        ]
        for obj in deleted:
            self._remove(request, rt, obj)
        document = {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": self.store.revision},
            "items": [
                {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} for obj in deleted
            ],
        }
        return self._json(200, document, request)
