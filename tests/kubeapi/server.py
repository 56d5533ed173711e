"""A Kubernetes API server emulator on 127.0.0.1 for tests that drive the real `kubernetes` client.

    with KubeApiEmulator() as kube_api:
        kube_api.kubeconfig(tmp_path / "kubeconfig")
        ...  # kubernetes.config.new_client_from_config(config_file=...) talks to it over HTTP

The client is not patched: requests travel over HTTP to a `ThreadingHTTPServer` on a free port,
which authenticates them (a bearer token), may fail, slow down or drop them on purpose (see
`faults.Faults`), records them in a request log, and answers them with the API server's
semantics (see `api.py` for what is emulated and what is not). The store can also be read
and written directly, without HTTP, faults or validation, and the cluster's components
(`controllers.py`) run when a test asks: `reconcile_statefulsets()`, `set_pod_running()`, ...

The emulator starts with the namespaces a new cluster has: default, kube-system, kube-public
and kube-node-lease. It speaks plain HTTP (no TLS) and knows one user (no RBAC: every
authenticated request is allowed).
"""

import copy
import secrets
import socket
import sys
import threading
import traceback
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

import yaml

from tests.kubeapi import errors
from tests.kubeapi.api import Api, Request, Response
from tests.kubeapi.controllers import Cluster
from tests.kubeapi.faults import WRITE_METHODS, Faults
from tests.kubeapi.resources import NODES, ResourceType, resource_for_kind, resource_for_kind_name
from tests.kubeapi.store import Store, now

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CONTEXT = "kube-api-emulator"


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    status: int | None = None  # None: no answer (the connection was dropped)
    fault: bool = False  # failed or dropped on purpose
    # The client's end of the TCP connection (its port): requests of one kept-alive connection
    # share it; a client that leaves an answer unread cannot send its next request on it.
    connection: int = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emulator: "KubeApiEmulator"

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        # Open client connections: a stopped server closes them, else their handler threads
        # would go on answering on kept-alive connections.
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients going away (or the emulator closing on them) is expected; anything else is
        # a bug in the emulator, kept for the fixture to report.
        if not isinstance(sys.exc_info()[1], OSError):
            self.emulator.server_errors.append(traceback.format_exc())

    def close_connections(self) -> None:
        with self.connections_lock:
            for connection in self.connections:
                with suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections open between requests, as the client's pool expects.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, each answer
    # would wait for the client's delayed ACK (about 40 ms).
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Quiet: the request log is the record."""

    def _handle(self) -> None:
        self.server.emulator._serve(self)

    def drop(self) -> None:
        self.close_connection = True
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def answer(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)


class KubeApiEmulator:
    def __init__(
        self, *, token: str | None = None, namespaces: Iterable[str] = DEFAULT_NAMESPACES
    ) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self.faults = Faults()
        # Tracebacks of requests the emulator itself failed on (answered 500): a bug here.
        self.server_errors: list[str] = []
        self._store = Store()
        self._cluster = Cluster(self._store)
        self._log: list[RecordedRequest] = []
        self._log_lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._api: Api | None = None
        self._port = 0
        self._stopping = threading.Event()
        for namespace in namespaces:
            self.put_object(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )

    # Lifecycle.

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the emulator is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Serve in a background thread; after a `stop()`, again on the same port and store."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", self._port))
        server.emulator = self
        self._server = server
        self._port = int(server.server_address[1])
        self._api = Api(self._store, self.url.removeprefix("http://"))
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kube-api-emulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes requests sleeping in a `slow` fault
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def kubeconfig(self, path: str | Path, *, token_file: str | None = None) -> Path:
        """Write a kubeconfig for this emulator (one cluster, user and context, made current).

        With `token_file`, the user reads its token from that file (`tokenFile`, relative to
        the kubeconfig's folder, as kubectl reads it) instead of holding it.
        """
        path = Path(path)
        user: dict[str, str] = {"tokenFile": token_file} if token_file else {"token": self.token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT, "cluster": {"server": self.url}}],
            "users": [{"name": f"{CONTEXT}-user", "user": user}],
            "contexts": [
                {
                    "name": CONTEXT,
                    "context": {
                        "cluster": CONTEXT,
                        "user": f"{CONTEXT}-user",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": CONTEXT,
            "preferences": {},
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def rotate_token(self) -> str:
        """Accept a new bearer token from now on, and only it (the old one has expired)."""
        self.token = secrets.token_urlsafe(32)
        return self.token

    # Serving.

    def _serve(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length > 0 else b""
        content_type = handler.headers.get("Content-Type")
        record = RecordedRequest(
            handler.command, split.path, query, content_type, connection=handler.client_address[1]
        )
        with self._log_lock:
            self._log.append(record)
        request = Request(
            method=handler.command,
            path=split.path,
            query=query,
            content_type=(content_type or "").split(";")[0].strip().lower(),
            accept=handler.headers.get("Accept") or "",
            user_agent=handler.headers.get("User-Agent") or "",
            body=body,
        )
        api = self._api
        assert api is not None
        decision = self.faults.decide(handler.command)
        if decision.delay:
            self._stopping.wait(decision.delay)
        if self._stopping.is_set():
            handler.drop()
            return
        if decision.drop:
            self._finish(record, None, fault=True)
            handler.drop()
            return
        if decision.status is not None:
            response = api.error(errors.fault(decision.status, decision.retry_after), request)
        elif handler.headers.get("Authorization") != f"Bearer {self.token}":
            response = api.error(errors.ApiError(401, "Unauthorized"), request)
        else:
            try:
                response = api.handle(request)
            except Exception as error:  # noqa: BLE001 - answered as the API server would
                self.server_errors.append(traceback.format_exc())
                response = api.error(errors.internal_error(repr(error)), request)
        # Recorded before answering, so the log is complete once the client has its answer.
        self._finish(record, response.status, fault=decision.failed)
        handler.answer(response)

    def _finish(self, record: RecordedRequest, status: int | None, *, fault: bool) -> None:
        with self._log_lock:
            record.status = status
            record.fault = fault

    # The request log.

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._log_lock:
            return list(self._log)

    def writes(self) -> list[RecordedRequest]:
        return [record for record in self.requests if record.method in WRITE_METHODS]

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    # Direct store access: no HTTP, no faults, no validation.

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        rt = resource_for_kind(api_version, kind)
        with self._store.lock:
            obj = self._store.get(rt, namespace, name)
            return copy.deepcopy(obj) if obj is not None else None

    def put_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace `obj` as given; the server fills in what it maintains.

        Namespaced objects without a namespace go to `default`. Answers the stored object.
        """
        rt = resource_for_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        obj = copy.deepcopy(obj)
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name"):
            raise ValueError("put_object needs metadata.name")
        if rt.namespaced:
            metadata.setdefault("namespace", "default")
        else:
            metadata.pop("namespace", None)
        with self._store.lock:
            old = self._store.get(rt, metadata.get("namespace"), metadata["name"])
            previous = (old or {}).get("metadata", {})
            metadata.setdefault("uid", previous.get("uid") or str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", previous.get("creationTimestamp") or now())
            return self._store.save(rt, obj)

    def delete_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Delete one object (a namespace with its contents); False when there was none."""
        rt = resource_for_kind(api_version, kind)
        with self._store.lock:
            if self._store.get(rt, namespace, name) is None:
                return False
            self._store.remove(rt, namespace, name)
            return True

    def objects(
        self, kind: str | None = None, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Stored objects of a kind (`"Pod"`), in a namespace, or all; by namespace and name."""
        rt: ResourceType | None = resource_for_kind_name(kind) if kind else None
        with self._store.lock:
            return [copy.deepcopy(obj) for _, obj in self._store.find(rt, namespace)]

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, str],
        capacity: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Store a ready Node offering `allocatable` (capacity defaults to the same)."""
        return self.put_object(
            {
                "apiVersion": NODES.api_version,
                "kind": NODES.kind,
                "metadata": {"name": name, "labels": dict(labels or {})},
                "spec": {},
                "status": {
                    "capacity": dict(capacity if capacity is not None else allocatable),
                    "allocatable": dict(allocatable),
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            }
        )

    def set_pod_log(
        self, namespace: str, pod: str, text: str, *, container: str | None = None
    ) -> None:
        """What `pods/log` answers for the pod (for one container, or for any)."""
        with self._store.lock:
            self._store.pod_logs[(namespace, pod, container or "")] = text

    # What the cluster's components would do, on demand (see `controllers`): no HTTP, no faults.

    def reconcile_statefulsets(self) -> None:
        """One pass of the statefulset controller and garbage collector over every namespace.

        Creates the missing pods `<set>-<ordinal>` (admitted against ResourceQuota like a POST;
        a refusal becomes a `FailedCreate` event on the set), deletes those above spec.replicas
        and those whose StatefulSet is gone, and brings each set's status up to date.
        """
        self._cluster.reconcile_statefulsets()

    def set_pod_running(
        self, namespace: str, name: str, *, ready: bool = True, node: str = "gpu-node-1"
    ) -> dict[str, Any]:
        """Bind the pod to `node` (unless bound) and report it Running, ready or not.

        Answers the stored pod; its StatefulSet's status follows.
        """
        return self._cluster.set_pod_running(namespace, name, ready=ready, node=node)

    def set_pod_unschedulable(
        self,
        namespace: str,
        name: str,
        *,
        message: str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    ) -> dict[str, Any]:
        """Report an unbound pod Pending and unschedulable, with the scheduler's event."""
        return self._cluster.set_pod_unschedulable(namespace, name, message=message)

    def set_pod_waiting(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        phase: str = "Pending",
        restart_count: int = 0,
        node: str = "gpu-node-1",
    ) -> dict[str, Any]:
        """Bind the pod (unless bound) and report its containers waiting, with the kubelet's event.

        E.g. reason `ImagePullBackOff`, message `Back-off pulling image "x"`; or reason
        `CrashLoopBackOff` with phase `Running` and a restart_count above 0 (the last run then
        terminated with exit code 1). Answers the stored pod.
        """
        return self._cluster.set_pod_waiting(
            namespace,
            name,
            reason=reason,
            message=message,
            phase=phase,
            restart_count=restart_count,
            node=node,
        )

    def add_event(
        self,
        namespace: str,
        *,
        kind: str,
        name: str,
        reason: str,
        message: str,
        type: str = "Warning",  # noqa: A002 - the Event's field
        component: str = "kubelet",
    ) -> dict[str, Any]:
        """Record an event about an object, as the component's event recorder would.

        The object need not exist; when it does, the event refers to it by uid. An identical
        event counts up instead of repeating. Answers the stored event.
        """
        return self._cluster.add_event(
            namespace,
            kind=kind,
            name=name,
            reason=reason,
            message=message,
            type=type,
            component=component,
        )
