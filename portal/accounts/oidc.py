"""The OpenID Connect provider: the only module that talks to it.

Sign-in is the authorization code flow through Authlib: endpoints and keys from the issuer's
discovery document, PKCE (S256), state kept in the session, and an ID token whose signature
(OIDC_SIGNING_ALGORITHMS, RS256 by default), issuer, audience, expiry and nonce are checked.
Access tokens the provider issues are accepted on the API once checked against the same keys,
the issuer, OIDC_API_AUDIENCE and OIDC_API_CLIENTS.
"""

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import requests
from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from django.conf import settings
from django.http import HttpRequest, HttpResponseRedirect
from django.utils.translation import gettext as _
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry
from rest_framework.exceptions import AuthenticationFailed

from portal.accounts.errors import ProviderUnavailable, SignInRefused

logger = logging.getLogger(__name__)

# The discovery document and keys are read again after this long (keys also on an unknown
# key id, at most once a minute, so tokens with made-up key ids cannot hammer the provider).
METADATA_MAX_AGE_SECONDS = 3600
KEYS_REFETCH_SECONDS = 60
LEEWAY_SECONDS = 60


@dataclass(frozen=True)
class _Config:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    timeout: int


_apps: dict[_Config, DjangoOAuth2App] = {}
_keys_fetched_at: dict[_Config, float] = {}
# The key set imported from each JWKS document, so a bearer request does not parse RSA keys
_key_sets: dict[_Config, tuple[dict[str, Any], KeySet]] = {}
_lock = threading.Lock()


def _config() -> _Config:
    return _Config(
        issuer=settings.OIDC_ISSUER_URL,
        client_id=settings.OIDC_CLIENT_ID,
        client_secret=settings.OIDC_CLIENT_SECRET or "",
        scopes=settings.OIDC_SCOPES,
        timeout=settings.OIDC_TIMEOUT_SECONDS,
    )


def _provider() -> tuple[DjangoOAuth2App, dict[str, Any], _Config]:
    """The registered client and its discovery document, read again when stale. A failed
    re-read keeps the document and keys it had (tried again after KEYS_REFETCH_SECONDS), so a
    provider outage does not stop the API from checking tokens with the cached keys."""
    config = _config()
    with _lock:
        app = _apps.get(config)
        if app is None:
            app = OAuth().register(
                name="portal",
                client_id=config.client_id,
                client_secret=config.client_secret or None,
                server_metadata_url=f"{config.issuer}/.well-known/openid-configuration",
                client_kwargs={
                    "scope": config.scopes,
                    "code_challenge_method": "S256",
                    "default_timeout": config.timeout,
                },
            )
            _apps[config] = app
        previous = app.server_metadata
        if time.time() - previous.get("_loaded_at", 0) > METADATA_MAX_AGE_SECONDS:
            app.server_metadata = {}
            try:
                app.load_server_metadata()
            except (requests.RequestException, ValueError) as error:
                if "issuer" not in previous:
                    app.server_metadata = previous
                    raise ProviderUnavailable(
                        _(
                            "The identity provider's discovery document could not be read "
                            "(%(error)s)."
                        )
                        % {"error": error}
                    ) from error
                logger.warning("keeping the provider's cached discovery document: %s", error)
                retry_at = time.time() - METADATA_MAX_AGE_SECONDS + KEYS_REFETCH_SECONDS
                app.server_metadata = {**previous, "_loaded_at": retry_at}
        metadata = app.server_metadata
        # Only the configured algorithms, whatever else the provider offers.
        metadata["id_token_signing_alg_values_supported"] = list(settings.OIDC_SIGNING_ALGORITHMS)
    if metadata.get("issuer") != config.issuer:
        raise SignInRefused(
            _("The provider's discovery document names the issuer %(named)s, not %(issuer)s.")
            % {"named": repr(metadata.get("issuer")), "issuer": repr(config.issuer)}
        )
    return app, metadata, config


def authorization_redirect(request: HttpRequest, *, redirect_uri: str) -> HttpResponseRedirect:
    """Send the browser to the provider's sign-in page (state, nonce and PKCE verifier in the
    session)."""
    app, _metadata, _config = _provider()
    return app.authorize_redirect(request, redirect_uri=redirect_uri)  # type: ignore[no-any-return]


def callback_claims(request: HttpRequest) -> tuple[dict[str, Any], str]:
    """The checked ID token's claims (with the userinfo answer merged in) and the raw ID token.

    Raises SignInRefused (tampered or replayed state, a provider error, a bad signature,
    issuer, audience, nonce or an expired token) or ProviderUnavailable.
    """
    app, metadata, config = _provider()
    options = {
        "iss": {"essential": True, "value": config.issuer},
        "aud": {"essential": True, "value": config.client_id},
    }
    try:
        token = app.authorize_access_token(request, claims_options=options, leeway=LEEWAY_SECONDS)
    except OAuthError as error:
        if error.error == "mismatching_state":
            raise SignInRefused(
                _(
                    "The sign-in answer does not match a sign-in started here (state mismatch). "
                    "Start again."
                )
            ) from error
        raise SignInRefused(
            _("The identity provider refused the sign-in: %(reason)s.")
            % {"reason": error.description or error.error}
        ) from error
    except JoseError as error:
        raise SignInRefused(
            _("The ID token failed its checks: %(reason)s.") % {"reason": _jose_reason(error)}
        ) from error
    except requests.RequestException as error:
        raise ProviderUnavailable(
            _("The identity provider could not be reached (%(error)s).") % {"error": error}
        ) from error
    if not token.get("userinfo") or not token.get("id_token"):
        raise SignInRefused(_("The provider answered without an ID token."))
    claims = dict(token["userinfo"])
    if metadata.get("userinfo_endpoint") and token.get("access_token"):
        try:
            extra = app.userinfo(token=token)
        except (requests.RequestException, OAuthError) as error:
            logger.warning("userinfo could not be read, using the ID token only: %s", error)
        else:
            if extra.get("sub") == claims["sub"]:
                claims = {**extra, **claims}
    return claims, token["id_token"]


def logout_url(*, id_token: str, post_logout_redirect_uri: str) -> str | None:
    """Where to send the browser to end the provider's session too, if the provider can."""
    try:
        app, metadata, config = _provider()
    except SignInRefused:
        return None
    if not metadata.get("end_session_endpoint"):
        return None
    result = app.create_logout_url(
        post_logout_redirect_uri=post_logout_redirect_uri,
        id_token_hint=id_token or None,
        client_id=config.client_id,
    )
    return str(result["url"])


def _jose_reason(error: JoseError) -> str:
    claim = getattr(error, "claim", None)
    if error.error == "expired_token":
        return _("it has expired")
    if claim == "aud":
        return _("it was issued for another client (audience)")
    if claim == "nonce":
        return _("its nonce does not match this sign-in")
    if claim == "iss":
        return _("it was issued by another provider")
    if claim:
        return _("the %(claim)s claim is invalid or missing") % {"claim": repr(claim)}
    return error.description or error.error


def _key_set(app: DjangoOAuth2App, config: _Config, *, refresh: bool) -> KeySet:
    if refresh:
        now = time.monotonic()
        if now - _keys_fetched_at.get(config, float("-inf")) < KEYS_REFETCH_SECONDS:
            raise InvalidKeyIdError
        _keys_fetched_at[config] = now
    jwks = app.fetch_jwk_set(force=refresh)
    cached = _key_sets.get(config)
    if cached is not None and cached[0] is jwks:
        return cached[1]
    key_set = KeySet.import_key_set(jwks)
    _key_sets[config] = (jwks, key_set)
    return key_set


def access_token_claims(token: str) -> dict[str, Any]:
    """The claims of a provider-issued JWT access token, checked locally: signature with the
    provider's (cached) keys, issuer, audience OIDC_API_AUDIENCE, expiry, issued to a client in
    OIDC_API_CLIENTS, and not an ID token. Raises AuthenticationFailed."""
    if not settings.SSO_ENABLED:
        raise AuthenticationFailed(_("Unknown or invalid token."))
    try:
        app, _metadata, config = _provider()
    except SignInRefused as error:
        raise AuthenticationFailed(error.reason) from error
    registry = JWSRegistry(algorithms=list(settings.OIDC_SIGNING_ALGORITHMS))
    try:
        try:
            decoded = jwt.decode(token, _key_set(app, config, refresh=False), registry=registry)
        except InvalidKeyIdError:
            decoded = jwt.decode(token, _key_set(app, config, refresh=True), registry=registry)
        jwt.JWTClaimsRegistry(
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": config.issuer},
            aud={"essential": True, "value": settings.OIDC_API_AUDIENCE},
            exp={"essential": True},
            sub={"essential": True},
        ).validate(decoded.claims)
    except (JoseError, ValueError) as error:
        reason = _jose_reason(error) if isinstance(error, JoseError) else _("it is not a JWT")
        raise AuthenticationFailed(
            _("The access token was refused: %(reason)s.") % {"reason": reason}
        ) from error
    except requests.RequestException as error:
        raise AuthenticationFailed(
            _("The identity provider's keys could not be read; try again.")
        ) from error
    claims = decoded.claims
    # An ID token (it went to the browser, and out again as a logout hint) is not an access
    # token: Keycloak marks them `typ: ID`, and only ID tokens carry a nonce.
    if claims.get("typ") == "ID" or "nonce" in claims or decoded.header.get("typ") == "id+jwt":
        raise AuthenticationFailed(
            _("The token was refused: it is an ID token, not an access token.")
        )
    client = claims.get("azp") or claims.get("client_id")
    if client not in settings.OIDC_API_CLIENTS:
        raise AuthenticationFailed(
            _(
                "The access token was refused: it was issued to the client %(client)s, which may "
                "not call the API (OIDC_API_CLIENTS)."
            )
            % {"client": repr(client)}
        )
    return claims


def forget_provider() -> None:
    """Drop the cached clients, documents and keys (settings changed, e.g. in tests)."""
    with _lock:
        _apps.clear()
        _keys_fetched_at.clear()
        _key_sets.clear()
