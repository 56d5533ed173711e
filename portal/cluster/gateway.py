"""The one place the portal talks to Kubernetes API servers.

Built on the official client's DynamicClient, so every kind goes through one code path
(discovery tells it the paths). Each call is retried here with backoff when the failure is
transient: 429 (honouring Retry-After), 5xx, timeouts and dropped connections. What is left
is raised as `ClusterUnavailable` (still transient: try the run again later) or
`ClusterRefused` (the API server said no; its message is kept for the admins).
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import urllib3
import yaml
from django.conf import settings

from portal.cluster.errors import ClusterRefused, ClusterUnavailable
from portal.cluster.models import Cluster, Connection

# The kubernetes client is imported where it is first used, not here: it takes a quarter of a
# second to import, and the web processes (which import this module through the services)
# never call a cluster; only the workers do.
if TYPE_CHECKING:
    from kubernetes.client import Configuration
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic import DynamicClient

logger = logging.getLogger(__name__)

FIELD_MANAGER = "gpu-portal"
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_SECONDS = 30.0

T = TypeVar("T")


def _status_message(error: "ApiException") -> str:
    """The API server's own explanation, from its Status body when there is one."""
    body: Any = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body:
        try:
            status = json.loads(body)
        except ValueError:
            return f"{error.status} {error.reason}: {str(body)[:500]}"
        if isinstance(status, dict) and status.get("message"):
            return f"{error.status} {status.get('reason') or error.reason}: {status['message']}"
    return f"{error.status} {error.reason}"


def _retry_after(error: "ApiException") -> float | None:
    headers = error.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return min(float(value), MAX_RETRY_AFTER_SECONDS) if value is not None else None
    except ValueError:
        return None


def _token_file(kubeconfig_path: str, context: str) -> Path | None:
    """The `tokenFile` of the kubeconfig's user in `context` (empty: the current context), as
    kubectl resolves it (relative to the kubeconfig's folder); None when the user has none."""
    try:
        config = yaml.safe_load(Path(kubeconfig_path).read_text()) or {}
        context = context or config.get("current-context") or ""
        user = next(
            item["context"].get("user")
            for item in config.get("contexts") or []
            if item.get("name") == context
        )
        token_file = next(
            item["user"].get("tokenFile")
            for item in config.get("users") or []
            if item.get("name") == user
        )
    except (OSError, yaml.YAMLError, StopIteration, AttributeError, KeyError, TypeError):
        return None
    return Path(kubeconfig_path).parent / token_file if token_file else None


def _read_token_file(path: Path) -> "Callable[[Configuration], None]":
    """A refresh hook the client calls before each request: the token as the file holds it now.

    Rotating tokens (projected service-account tokens, tokens renewed by a sidecar or by the
    kubelet updating a mounted Secret) are rewritten in place; the client alone would keep the
    one it read first until its gateway is closed. An unreadable file keeps the last token.
    """

    def refresh(configuration: "Configuration") -> None:
        try:
            token = path.read_text().strip()
        except OSError:
            return
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"

    return refresh


def _configuration(cluster: Cluster) -> "Configuration":
    from kubernetes import client as k8s_client  # noqa: PLC0415  (see the imports)
    from kubernetes import config as k8s_config  # noqa: PLC0415
    from kubernetes.config.config_exception import ConfigException  # noqa: PLC0415

    configuration = k8s_client.Configuration()
    try:
        if cluster.connection == Connection.KUBECONFIG:
            k8s_config.load_kube_config(
                config_file=cluster.kubeconfig_path,
                context=cluster.kubeconfig_context or None,
                client_configuration=configuration,
                persist_config=False,
            )
            token_file = _token_file(cluster.kubeconfig_path, cluster.kubeconfig_context)
            if token_file is not None:
                # The client's stubs type the hook as always None.
                configuration.refresh_api_key_hook = _read_token_file(token_file)  # type: ignore[assignment]
        else:
            # The pod's projected token rotates (hourly by default): the client re-reads it
            # (at most a minute late, well within the old token's remaining validity).
            k8s_config.load_incluster_config(
                client_configuration=configuration, try_refresh_token=True
            )
    except (ConfigException, OSError, TypeError) as error:
        raise ClusterRefused(f"Cannot connect to cluster {cluster.name}: {error}") from None
    # Retries are ours (counted, with backoff and Retry-After), not urllib3's.
    configuration.retries = False
    return configuration


@dataclass(frozen=True)
class Answer:
    """An API server's answer to one request: its status and its JSON body, read to the end."""

    status: int
    body: dict[str, Any]


class KubernetesGateway:
    """Calls to one cluster. `requests` counts the API calls made (retries included)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.requests = 0
        self._timeout = settings.PORTAL_CLUSTER_TIMEOUT_SECONDS
        self._attempts = settings.PORTAL_CLUSTER_RETRY_ATTEMPTS
        self._backoff = settings.PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS
        from kubernetes.client import ApiClient  # noqa: PLC0415  (see the imports)

        self._api_client = ApiClient(_configuration(cluster))
        self._dynamic: DynamicClient | None = None  # built on first use

    def close(self) -> None:
        self._api_client.close()

    def _call(self, what: str, call: Callable[[], T], *, counted: bool = True) -> T:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415  (see the imports)
        from kubernetes.dynamic.exceptions import (  # noqa: PLC0415
            ResourceNotFoundError,
            ResourceNotUniqueError,
        )

        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            # Discovery is not counted: the client caches it on disk, so it rarely calls.
            self.requests += counted
            try:
                return call()
            except (ResourceNotFoundError, ResourceNotUniqueError) as error:
                raise ClusterRefused(f"{what}: the cluster does not serve it ({error})") from None
            except ApiException as error:  # the dynamic client's errors derive from it
                status = error.status or 0
                if status not in TRANSIENT_STATUSES:
                    raise ClusterRefused(
                        f"{what}: {_status_message(error)}", status=status
                    ) from None
                failure = f"{what}: {_status_message(error)}"
                wait = _retry_after(error) if status == 429 else None
            except (urllib3.exceptions.HTTPError, OSError) as error:
                status, wait = 0, None
                failure = f"{what}: {type(error).__name__}: {error}"
            if attempt == self._attempts:
                raise ClusterUnavailable(
                    f"{failure} (after {attempt} attempts)", status=status or None
                )
            logger.info("cluster %s: %s; retrying", self.cluster.name, failure)
            time.sleep(wait if wait is not None else delay)
            delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _client(self) -> "DynamicClient":
        from kubernetes.dynamic import DynamicClient  # noqa: PLC0415  (see the imports)

        if self._dynamic is None:
            self._dynamic = self._call(
                "discovery", lambda: DynamicClient(self._api_client), counted=False
            )
        return self._dynamic

    def _resource(self, api_version: str, kind: str) -> Any:
        dynamic = self._client()
        return self._call(
            f"discovery of {kind}",
            lambda: dynamic.resources.get(api_version=api_version, kind=kind),
            counted=False,
        )

    def _request(
        self, what: str, method: str, resource: Any, *, missing_ok: bool = False, **kwargs: Any
    ) -> Answer | None:
        """The API server's answer; None for a 404 when `missing_ok`."""
        operation = getattr(self._client(), method)

        def send() -> Answer:
            response = operation(
                resource, serialize=False, _request_timeout=self._timeout, **kwargs
            )
            # The client does not preload answers: read each to its end (a write's too), or
            # its connection is held, and dropped mid-answer when the client closes.
            try:
                data = response.data
            finally:
                response.release_conn()
            return Answer(status=int(response.status), body=json.loads(data) if data else {})

        try:
            return self._call(what, send)
        except ClusterRefused as error:
            if missing_ok and error.status == 404:
                return None
            raise

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        resource = self._resource(api_version, kind)
        response = self._request(
            f"get {kind} {name}", "get", resource, missing_ok=True, name=name, namespace=namespace
        )
        return None if response is None else response.body

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind in a namespace (or all namespaces), narrowed by selectors."""
        resource = self._resource(api_version, kind)
        response = self._request(
            f"list {kind}",
            "get",
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        return list(response.body.get("items") or []) if response else []

    def apply(self, manifest: dict[str, Any]) -> bool:
        """Server-side apply under the portal's field manager, taking over conflicting fields.
        True when the object was created (the API server answers 201)."""
        kind = manifest["kind"]
        metadata = manifest["metadata"]
        resource = self._resource(manifest["apiVersion"], kind)
        response = self._request(
            f"apply {kind} {metadata['name']}",
            "server_side_apply",
            resource,
            body=manifest,
            namespace=metadata.get("namespace"),
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )
        return response is not None and response.status == 201

    def merge_patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: dict[str, Any]
    ) -> None:
        """A JSON merge patch (RFC 7386) of one object, as another writer would make it."""
        resource = self._resource(api_version, kind)
        self._request(
            f"patch {kind} {name}",
            "patch",
            resource,
            name=name,
            namespace=namespace,
            body=patch,
            content_type="application/merge-patch+json",
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        seen: dict[str, Any] | None = None,
    ) -> bool:
        """Delete one object; False when it was already gone.

        With `seen` (the object as read), only that very object is deleted: the API server
        refuses (409) if it was replaced or changed since, so a check made on it still holds.
        """
        resource = self._resource(api_version, kind)
        body = None
        if seen is not None:
            metadata = seen.get("metadata") or {}
            preconditions = {
                key: metadata[key] for key in ("uid", "resourceVersion") if metadata.get(key)
            }
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        response = self._request(
            f"delete {kind} {name}",
            "delete",
            resource,
            missing_ok=True,
            name=name,
            namespace=namespace,
            body=body,
        )
        return response is not None
