"""An HTTP double of Keycloak's admin REST API: the part the portal's directory sync uses.

It serves, for one realm, what python-keycloak 7.1.1 requests for the calls the gateway makes
(see portal/directory/keycloak.py), shaped as Keycloak's documented REST API answers them:

- `POST /realms/{realm}/protocol/openid-connect/token`: the client-credentials grant, checking
  the client id and secret; answers a bearer token.
- under `/admin/realms/{realm}/`, each checking the bearer token (401 without one):
  `GET group-by-path/{path}`, `POST groups` (a top-level group), `GET|POST groups/{id}/children`,
  `GET groups/{id}/members`, `GET users?username=&exact=`, and `PUT|DELETE
  users/{id}/groups/{groupId}` (join and leave a group; both idempotent, answering 204).

Users, the group tree and memberships live in memory. Every request is recorded. `outage`
makes every request answer 503, as a proxy in front of a Keycloak that is down does; `latency`
makes every answer wait. A request
the double does not serve is answered 404 and recorded in `server_errors`, so the fixture can
say the double, not the code under test, is missing something.
"""

import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN_LIFETIME_SECONDS = 300
MEMBERSHIP = r"(?P<id>[^/]+)/groups/(?P<group>[^/]+)"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]


@dataclass
class Group:
    id: str
    name: str
    path: str
    parent_id: str | None
    members: set[str] = field(default_factory=set)  # user ids


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class KeycloakError(Exception):
    def __init__(self, status: int, body: dict[str, str]) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


def _not_found(what: str) -> KeycloakError:
    return KeycloakError(404, {"error": what})


class KeycloakDouble:
    """One realm of a Keycloak server, on a free loopback port, in a thread."""

    def __init__(
        self,
        *,
        realm: str = "gpu-portal",
        client_id: str = "gpu-portal-sync",
        client_secret: str = "sync-secret",  # noqa: S107  (a test double's)
    ) -> None:
        self.realm = realm
        self.client_id = client_id
        self.client_secret = client_secret
        self.outage = False
        self.latency = 0.0  # seconds each answer waits: a slow Keycloak
        self.requests: list[RecordedRequest] = []
        self.server_errors: list[str] = []
        self._users: dict[str, dict[str, Any]] = {}
        self._groups: dict[str, Group] = {}
        self._tokens: set[str] = set()
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        routes: list[tuple[str, str, Callable[..., Reply]]] = [
            ("POST", rf"/realms/{realm}/protocol/openid-connect/token", self._token),
            ("GET", rf"/admin/realms/{realm}/group-by-path/(?P<path>.*)", self._group_by_path),
            ("POST", rf"/admin/realms/{realm}/groups", self._group_create_top),
            ("GET", rf"/admin/realms/{realm}/groups/(?P<id>[^/]+)/children", self._children),
            ("POST", rf"/admin/realms/{realm}/groups/(?P<id>[^/]+)/children", self._child_create),
            ("GET", rf"/admin/realms/{realm}/groups/(?P<id>[^/]+)/members", self._members),
            ("GET", rf"/admin/realms/{realm}/users", self._users_search),
            ("PUT", rf"/admin/realms/{realm}/users/{MEMBERSHIP}", self._join),
            ("DELETE", rf"/admin/realms/{realm}/users/{MEMBERSHIP}", self._leave),
        ]
        self._routes = [(method, re.compile(pattern), f) for method, pattern, f in routes]

    # Running

    def __enter__(self) -> "KeycloakDouble":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                double._handle(self, "GET")

            def do_POST(self) -> None:
                double._handle(self, "POST")

            def do_PUT(self) -> None:
                double._handle(self, "PUT")

            def do_DELETE(self) -> None:
                double._handle(self, "DELETE")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="keycloak-double", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the double is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # What tests set up and look at

    def add_user(self, username: str) -> str:
        """A user of the realm (Keycloak keeps usernames in lower case); returns the id."""
        with self._lock:
            user_id = str(uuid.uuid4())
            self._users[user_id] = {
                "id": user_id,
                "username": username.lower(),
                "enabled": True,
                "emailVerified": False,
                "createdTimestamp": 0,
            }
            return user_id

    def group_paths(self) -> set[str]:
        with self._lock:
            return {group.path for group in self._groups.values()}

    def group_members(self, path: str) -> set[str]:
        """Usernames of the direct members of the group at `path` (empty if there is none)."""
        with self._lock:
            group = self._find(path)
            if group is None:
                return set()
            return {self._users[user_id]["username"] for user_id in group.members}

    def add_to_group(self, path: str, username: str) -> None:
        """Put a user (made if new) in the group at `path` (made with its parents if new), as
        someone working in Keycloak's own console would."""
        with self._lock:
            user_id = self._user_id(username) or self.add_user(username)
            self._ensure(path).members.add(user_id)

    def remove_from_group(self, path: str, username: str) -> None:
        with self._lock:
            group, user_id = self._find(path), self._user_id(username)
            if group is not None and user_id is not None:
                group.members.discard(user_id)

    def requests_to(self, method: str, fragment: str = "") -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method and fragment in r.path]

    def group_changes(self) -> list[tuple[str, str, str]]:
        """`(join|leave, username, group path)` for each membership request, in order."""
        pattern = re.compile(rf"/admin/realms/{self.realm}/users/{MEMBERSHIP}")
        done = []
        with self._lock:
            for request in self.requests:
                match = pattern.fullmatch(request.path)
                user = self._users.get(match["id"]) if match else None
                group = self._groups.get(match["group"]) if match else None
                if user and group and request.method in ("PUT", "DELETE"):
                    verb = "join" if request.method == "PUT" else "leave"
                    done.append((verb, user["username"], group.path))
        return done

    # The tree

    def _find(self, path: str) -> Group | None:
        normal = "/" + path.strip("/")
        return next((g for g in self._groups.values() if g.path == normal), None)

    def _user_id(self, username: str) -> str | None:
        lower = username.lower()
        return next((i for i, u in self._users.items() if u["username"] == lower), None)

    def _ensure(self, path: str) -> Group:
        parent: Group | None = None
        for name in path.strip("/").split("/"):
            found = self._find(f"{parent.path if parent else ''}/{name}")
            parent = found or self._new_group(name, parent)
        assert parent is not None
        return parent

    def _new_group(self, name: str, parent: Group | None) -> Group:
        if not name or "/" in name:
            raise KeycloakError(400, {"errorMessage": "Group name is missing or invalid"})
        path = f"{parent.path if parent else ''}/{name}"
        if self._find(path) is not None:
            where = "Sibling" if parent else "Top level"
            raise KeycloakError(
                409, {"errorMessage": f"{where} group named '{name}' already exists."}
            )
        group = Group(
            id=str(uuid.uuid4()), name=name, path=path, parent_id=parent.id if parent else None
        )
        self._groups[group.id] = group
        return group

    def _representation(self, group: Group) -> dict[str, Any]:
        children = [g for g in self._groups.values() if g.parent_id == group.id]
        body: dict[str, Any] = {
            "id": group.id,
            "name": group.name,
            "path": group.path,
            "subGroupCount": len(children),
            "subGroups": [],
            "attributes": {},
            "realmRoles": [],
            "clientRoles": {},
            "access": {"view": True, "manage": True, "manageMembership": True},
        }
        if group.parent_id:
            body["parentId"] = group.parent_id
        return body

    def _group(self, group_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            raise _not_found("Could not find group by id")
        return group

    # HTTP

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        with self._lock:
            self.requests.append(RecordedRequest(method, parts.path, query))
        try:
            reply = self._dispatch(method, parts.path, query, raw, handler.headers)
        except KeycloakError as error:
            reply = Reply(error.status, error.body)
        except Exception as error:  # noqa: BLE001  (a bug in the double: say so, loudly)
            self.server_errors.append(f"{method} {handler.path}: {type(error).__name__}: {error}")
            reply = Reply(500, {"error": "unknown_error"})
        self._send(handler, reply)

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], raw: bytes, headers: Any
    ) -> Reply:
        if self.latency:
            time.sleep(self.latency)
        if self.outage:
            return Reply(503, b"Service Unavailable")
        for route_method, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if match and route_method == method:
                if not path.startswith("/realms/"):
                    self._check_token(headers.get("Authorization", ""))
                with self._lock:
                    return handler(query=query, raw=raw, **match.groupdict())
        self.server_errors.append(f"the double does not serve {method} {path}")
        return Reply(404, {"error": "RESTEASY003210: Could not find resource for full path"})

    def _send(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if isinstance(reply.body, bytes):
            body, content_type = reply.body, "text/plain"
        elif reply.body is None:
            body, content_type = b"", ""
        else:
            body, content_type = json.dumps(reply.body).encode(), "application/json"
        handler.send_response(reply.status)
        if content_type:
            handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        if body:
            handler.wfile.write(body)

    def _check_token(self, authorization: str) -> None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or token not in self._tokens:
            raise KeycloakError(401, {"error": "HTTP 401 Unauthorized"})

    @staticmethod
    def _json(raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            raise KeycloakError(400, {"error": "unknown_error"}) from None
        if not isinstance(body, dict):
            raise KeycloakError(400, {"error": "unknown_error"})
        return body

    @staticmethod
    def _page(items: list[Any], query: dict[str, str]) -> list[Any]:
        first = int(query.get("first", 0))
        most = int(query.get("max", 100))
        return items[first : first + most]

    # Endpoints

    def _token(self, *, query: dict[str, str], raw: bytes) -> Reply:
        form = {key: values[-1] for key, values in parse_qs(raw.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            return Reply(400, {"error": "unsupported_grant_type"})
        credentials = (form.get("client_id"), form.get("client_secret"))
        if credentials != (self.client_id, self.client_secret):
            description = "Invalid client or Invalid client credentials"
            return Reply(401, {"error": "unauthorized_client", "error_description": description})
        token = secrets.token_urlsafe(24)
        self._tokens.add(token)
        return Reply(
            200,
            {
                "access_token": token,
                "expires_in": TOKEN_LIFETIME_SECONDS,
                "refresh_expires_in": 0,
                "token_type": "Bearer",
                "not-before-policy": 0,
                "scope": "profile email",
            },
        )

    def _group_by_path(self, *, query: dict[str, str], raw: bytes, path: str) -> Reply:
        group = self._find(unquote(path))
        if group is None:
            raise _not_found("Group path does not exist")
        return Reply(200, self._representation(group))

    def _created(self, group: Group) -> Reply:
        location = f"{self.url}/admin/realms/{self.realm}/groups/{group.id}"
        return Reply(201, None, {"Location": location})

    def _group_create_top(self, *, query: dict[str, str], raw: bytes) -> Reply:
        return self._created(self._new_group(str(self._json(raw).get("name", "")), None))

    def _child_create(self, *, query: dict[str, str], raw: bytes, id: str) -> Reply:  # noqa: A002
        parent = self._group(id)
        return self._created(self._new_group(str(self._json(raw).get("name", "")), parent))

    def _children(self, *, query: dict[str, str], raw: bytes, id: str) -> Reply:  # noqa: A002
        parent = self._group(id)
        children = sorted(
            (g for g in self._groups.values() if g.parent_id == parent.id), key=lambda g: g.name
        )
        return Reply(200, self._page([self._representation(g) for g in children], query))

    def _members(self, *, query: dict[str, str], raw: bytes, id: str) -> Reply:  # noqa: A002
        group = self._group(id)
        users = sorted((self._users[i] for i in group.members), key=lambda u: u["username"])
        return Reply(200, self._page(users, query))

    def _users_search(self, *, query: dict[str, str], raw: bytes) -> Reply:
        users = sorted(self._users.values(), key=lambda u: u["username"])
        wanted = query.get("username", "").lower()
        if wanted:
            exact = query.get("exact", "").lower() == "true"
            users = [
                u for u in users if (u["username"] == wanted if exact else wanted in u["username"])
            ]
        return Reply(200, self._page(users, query))

    def _membership(self, user_id: str, group_id: str) -> tuple[dict[str, Any], Group]:
        user = self._users.get(user_id)
        if user is None:
            raise _not_found("User not found")
        group = self._groups.get(group_id)
        if group is None:
            raise _not_found("Group not found")
        return user, group

    def _join(self, *, query: dict[str, str], raw: bytes, id: str, group: str) -> Reply:  # noqa: A002
        user, found = self._membership(id, group)
        found.members.add(user["id"])
        return Reply(204)

    def _leave(self, *, query: dict[str, str], raw: bytes, id: str, group: str) -> Reply:  # noqa: A002
        user, found = self._membership(id, group)
        found.members.discard(user["id"])
        return Reply(204)
