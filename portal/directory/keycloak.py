"""The Keycloak admin API: the only module of the portal that changes Keycloak's directory.

It signs in as a service account (client credentials) and works on the groups that stand for
tenant roles (`PORTAL_TENANT_GROUP`, e.g. `/gpu-portal/tenants/vision/leads`): it creates them,
puts users in them and reads who is in them. Every failure is one of two errors: the directory
is unavailable (try again later) or it refused the change (trying again will not help).
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from keycloak import KeycloakAdmin, KeycloakOpenIDConnection
from keycloak.exceptions import KeycloakConnectionError, KeycloakError

from portal.accounts.groups import tenant_group
from tenants.models import MemberRole

# The roles a tenant's groups stand for, in the order they are created and read.
ROLES = (MemberRole.LEAD.value, MemberRole.DEVELOPER.value)

HTTP_NOT_FOUND = 404
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVER_ERROR = 500
# The service account's own credentials or permissions: wrong for every change alike, so they
# hold the queue (like an outage) rather than fail each change in turn.
HTTP_ACCOUNT_PROBLEMS = (401, 403)


class DirectoryError(Exception):
    """Keycloak could not do what was asked; `message` says why, for people."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DirectoryUnavailable(DirectoryError):
    """Transient: no answer, a timeout, 5xx, 429, or the service account cannot sign in."""


class DirectoryRefused(DirectoryError):
    """Keycloak refused this change (a user it does not know, another 4xx): retrying the same
    change as it is will not help."""


def _text(value: str | bytes | None) -> str:
    """A readable error from Keycloak's answer: its JSON error's description, or the text."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = (value or "").strip()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("errorMessage", "error_description", "error"):
            if body.get(key):
                text = str(body[key])
                break
    return text[:500]


@dataclass(frozen=True)
class DirectoryConfig:
    server_url: str
    realm: str
    client_id: str
    client_secret: str
    timeout: int
    group_template: str

    @classmethod
    def from_settings(cls) -> "DirectoryConfig":
        return cls(
            server_url=settings.KEYCLOAK_SERVER_URL,
            realm=settings.KEYCLOAK_REALM,
            client_id=settings.KEYCLOAK_ADMIN_CLIENT_ID,
            client_secret=settings.KEYCLOAK_ADMIN_CLIENT_SECRET or "",
            timeout=settings.OIDC_TIMEOUT_SECONDS,
            group_template=settings.PORTAL_TENANT_GROUP,
        )


@dataclass
class KeycloakDirectory:
    """A session with Keycloak's admin API for one batch of work (a send, a reconcile).

    Group ids are remembered for the session; `groups_created` counts the groups it created.
    """

    config: DirectoryConfig
    groups_created: int = 0
    _group_ids: dict[str, str] = field(default_factory=dict)
    _admin: KeycloakAdmin | None = None

    @classmethod
    def from_settings(cls) -> "KeycloakDirectory":
        return cls(DirectoryConfig.from_settings())

    @property
    def admin(self) -> KeycloakAdmin:
        if self._admin is None:
            config = self.config
            self._admin = KeycloakAdmin(
                connection=KeycloakOpenIDConnection(
                    # A trailing slash keeps a path prefix (`https://host/auth/`) in every URL.
                    server_url=config.server_url.rstrip("/") + "/",
                    realm_name=config.realm,
                    client_id=config.client_id,
                    client_secret_key=config.client_secret,
                    timeout=config.timeout,
                )
            )
        return self._admin

    def _error(self, error: Exception, what: str) -> DirectoryError:
        """python-keycloak's error (or a malformed answer) as DirectoryUnavailable or Refused."""
        if isinstance(error, KeycloakConnectionError):
            cause = error.__cause__ or error
            return DirectoryUnavailable(
                f"Keycloak at {self.config.server_url} did not answer ({what}): {cause}"
            )
        if not isinstance(error, KeycloakError):  # an answer that is not Keycloak's (a proxy?)
            return DirectoryUnavailable(f"Keycloak gave an unexpected answer ({what}): {error}")
        code = error.response_code
        detail = _text(error.error_message) or "no details"
        if (
            code is None
            or code >= HTTP_SERVER_ERROR
            or code == HTTP_TOO_MANY_REQUESTS
            or code in HTTP_ACCOUNT_PROBLEMS
        ):
            return DirectoryUnavailable(
                f"Keycloak answered {code or 'an error'} ({what}): {detail}"
            )
        return DirectoryRefused(f"Keycloak refused ({what}): {code}: {detail}")

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except (KeycloakError, TypeError, ValueError) as error:
            raise self._error(error, what) from error

    # Groups

    def group_paths(self, tenant_slug: str) -> dict[str, str]:
        """`{role: group path}` of a tenant's groups."""
        return {role: tenant_group(self.config.group_template, tenant_slug, role) for role in ROLES}

    def _group_find(self, path: str) -> str | None:
        """The id of the group at `path`, or None when there is none."""
        if path not in self._group_ids:
            try:
                group = self.admin.get_group_by_path(path)
            except KeycloakError as error:
                if error.response_code == HTTP_NOT_FOUND:
                    return None
                raise self._error(error, f"reading group {path}") from error
            except (TypeError, ValueError) as error:
                raise self._error(error, f"reading group {path}") from error
            self._group_ids[path] = str(group["id"])
        return self._group_ids[path]

    def _group_ensure(self, path: str) -> str:
        """The id of the group at `path`, creating it and any missing parent."""
        found = self._group_find(path)
        if found is not None:
            return found
        parent_path, _, name = path.rpartition("/")
        parent_id = self._group_ensure(parent_path) if parent_path else None
        with self._translated(f"creating group {path}"):
            # 409 (someone created it meanwhile) is skipped: the group is read back below.
            created = self.admin.create_group({"name": name}, parent=parent_id, skip_exists=True)
        if created:
            self.groups_created += 1
            self._group_ids[path] = created
            return created
        found = self._group_find(path)
        if found is None:
            raise DirectoryUnavailable(f"Keycloak did not show group {path} after creating it.")
        return found

    def tenant_groups_ensure(self, tenant_slug: str) -> dict[str, str]:
        """Make sure the tenant's groups (and every group above them) exist: `{role: id}`."""
        return {
            role: self._group_ensure(path) for role, path in self.group_paths(tenant_slug).items()
        }

    def tenant_members(self, tenant_slug: str) -> dict[str, set[str]]:
        """`{role: usernames}` of the tenant's groups (created if missing), direct members only."""
        members: dict[str, set[str]] = {}
        for role, group_id in self.tenant_groups_ensure(tenant_slug).items():
            with self._translated(f"reading the members of {self.group_paths(tenant_slug)[role]}"):
                users = self.admin.get_group_members(group_id, {"briefRepresentation": True})
            members[role] = {str(user["username"]) for user in users}
        return members

    # Users

    def _user_id(self, username: str) -> str | None:
        with self._translated(f"looking up user {username}"):
            user_id = self.admin.get_user_id(username)
        return str(user_id) if user_id else None

    def member_role_set(self, *, tenant_slug: str, username: str, role: str) -> None:
        """Put `username` in the group of `role` in the tenant and out of the other one; `role`
        "" takes them out of both. Idempotent. A user Keycloak does not know is refused, unless
        they are to be in no group, which is then already true."""
        if role and role not in ROLES:
            raise DirectoryRefused(f"Unknown role {role!r}.")
        user_id = self._user_id(username)
        if user_id is None:
            if not role:
                return
            raise DirectoryRefused(
                f"User {username} does not exist in Keycloak (realm {self.config.realm}); "
                "they appear there once they have signed in or been created."
            )
        paths = self.group_paths(tenant_slug)
        for group_role, group_id in self.tenant_groups_ensure(tenant_slug).items():
            if group_role == role:
                with self._translated(f"adding {username} to {paths[group_role]}"):
                    self.admin.group_user_add(user_id, group_id)
            else:
                with self._translated(f"removing {username} from {paths[group_role]}"):
                    self.admin.group_user_remove(user_id, group_id)
