"""A Keycloak-shaped OpenID provider double for what oidc-provider-mock cannot be made to do.

It serves a realm's discovery document, signing keys, authorization, token and end-session
endpoints (`/realms/<realm>/protocol/openid-connect/...`) on a loopback port, checks the client
secret and the PKCE verifier, and signs RS256 tokens whose claims a test can bend (another
audience, an expired token, another key) to see the portal refuse them. `mint()` signs access
tokens for the API the way Keycloak does (aud, azp, groups, resource_access).
"""

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

REALM = "gpu-portal"
CLIENT_ID = "gpu-portal"
CLIENT_SECRET = "portal-client-secret"


def rsa_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@dataclass
class KeycloakIssuer:
    base_url: str = ""
    key: RSAKey = field(default_factory=lambda: rsa_key("realm-key"))
    # the person the authorization endpoint signs in, with their claims
    user: dict[str, Any] = field(default_factory=dict)
    # claims replaced in the next ID tokens (e.g. {"aud": "another-client"})
    id_token_overrides: dict[str, Any] = field(default_factory=dict)
    # sign the next tokens with this key instead of the published one
    signing_key: RSAKey | None = None
    # sign the next tokens with HS256 and the client secret (the algorithm-confusion attack)
    sign_with_client_secret: bool = False
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    @property
    def issuer(self) -> str:
        return f"{self.base_url}/realms/{REALM}"

    def sign(self, claims: dict[str, Any]) -> str:
        if self.sign_with_client_secret:
            secret = OctKey.import_key(CLIENT_SECRET.encode())
            return jwt.encode({"alg": "HS256"}, claims, secret, algorithms=["HS256"])
        key = self.signing_key or self.key
        header = {"alg": "RS256", "kid": key.kid, "typ": "JWT"}
        return jwt.encode(header, claims, key)

    def mint(
        self, *, audience: str | list[str] = CLIENT_ID, lifetime: int = 300, **claims: Any
    ) -> str:
        """A Keycloak-like access token for the API."""
        now = int(time.time())
        body = {
            "iss": self.issuer,
            "aud": audience,
            "azp": CLIENT_ID,
            "typ": "Bearer",
            "iat": now,
            "exp": now + lifetime,
            **self.user,
            **claims,
        }
        return self.sign(body)

    # The endpoints.

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        self.requests.append(f"{request.method} {request.path}")
        prefix = f"/realms/{REALM}"
        routes = {
            f"{prefix}/.well-known/openid-configuration": self._discovery,
            f"{prefix}/protocol/openid-connect/certs": self._certs,
            f"{prefix}/protocol/openid-connect/auth": self._authorize,
            f"{prefix}/protocol/openid-connect/token": self._token,
            f"{prefix}/protocol/openid-connect/logout": self._logout,
        }
        handler = routes.get(request.path)
        response = handler(request) if handler else _json({"error": "not found"}, 404)
        return response(environ, start_response)

    def _discovery(self, request: Request) -> Response:
        base = f"{self.issuer}/protocol/openid-connect"
        return _json(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{base}/auth",
                "token_endpoint": f"{base}/token",
                "jwks_uri": f"{base}/certs",
                "end_session_endpoint": f"{base}/logout",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256", "HS256"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    def _certs(self, request: Request) -> Response:
        return _json(KeySet([self.key]).as_dict(private=False))

    def _authorize(self, request: Request) -> Response:
        args = request.args
        if args.get("client_id") != CLIENT_ID or args.get("code_challenge_method") != "S256":
            return _json({"error": "invalid_request"}, 400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "nonce": args.get("nonce"),
            "challenge": args["code_challenge"],
            "redirect_uri": args["redirect_uri"],
        }
        query = urlencode({"code": code, "state": args.get("state", "")})
        return Response(status=302, headers={"Location": f"{args['redirect_uri']}?{query}"})

    def _token(self, request: Request) -> Response:
        form = request.form
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if request.authorization is not None:
            client_id = request.authorization.username
            secret = request.authorization.password
        if client_id != CLIENT_ID or secret != CLIENT_SECRET:
            return _json({"error": "unauthorized_client"}, 401)
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("redirect_uri") != grant["redirect_uri"]:
            return _json({"error": "invalid_grant"}, 400)
        verifier = form.get("code_verifier", "")
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        if digest.rstrip(b"=").decode() != grant["challenge"]:
            return _json({"error": "invalid_grant", "error_description": "PKCE"}, 400)
        now = int(time.time())
        id_claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "azp": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **self.user,
            **self.id_token_overrides,
        }
        return _json(
            {
                "access_token": self.mint(),
                "id_token": self.sign(id_claims),
                "token_type": "Bearer",
                "expires_in": 300,
            }
        )

    def _logout(self, request: Request) -> Response:
        target = request.args.get("post_logout_redirect_uri", "")
        return Response(status=302, headers={"Location": target}) if target else _json({})


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


@contextmanager
def keycloak_issuer_running() -> Iterator[KeycloakIssuer]:
    issuer = KeycloakIssuer()
    server: BaseWSGIServer = make_server("127.0.0.1", 0, issuer, threaded=True)
    issuer.base_url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        thread.join()
