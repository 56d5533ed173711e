import requests


def test_the_oidc_provider_publishes_discovery_and_signing_keys(oidc_provider: str) -> None:
    discovery = requests.get(f"{oidc_provider}/.well-known/openid-configuration", timeout=5).json()
    keys = requests.get(discovery["jwks_uri"], timeout=5).json()

    assert discovery["issuer"] == oidc_provider
    assert "code" in discovery["response_types_supported"]
    assert keys["keys"][0]["kty"] == "RSA"
