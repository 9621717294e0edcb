"""How the local GitHub stand-in authenticates callers: App JWTs and installation tokens."""

from __future__ import annotations

from typing import Literal

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from bot.fakehub.state import HubError, HubState, Token

AuthKind = Literal["jwt", "token", "none"]
JWT_MAX_LIFETIME = 600  # GitHub: exp "no more than 10 minutes into the future"
CLOCK_DRIFT = 60  # how far in the future an `iat` may lie
_TOKEN_PREFIXES = ("ghs_", "ghu_", "ghp_", "gho_", "github_pat_")
# The one `apps/` operation an installation token calls, not the App's JWT.
_INSTALLATION_APPS_OPERATIONS = frozenset({"apps/list-repos-accessible-to-installation"})
_ISSUED_AT = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion"
    " was issued"
)
_EXPIRED = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time"
    " at which the assertion expires"
)


def credential(header: str) -> tuple[AuthKind, str]:
    """Classify an `Authorization` header (`Bearer x` or `token x`) as a JWT, a token or none."""
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() not in ("bearer", "token") or not value:
        return "none", ""
    # Stateless installation tokens (ghs_APPID_JWT) contain dots too: the prefix decides.
    if value.count(".") == 2 and not value.startswith(_TOKEN_PREFIXES):
        return "jwt", value
    return "token", value


def verify_jwt(state: HubState, public_key: RSAPublicKey, token: str) -> None:
    """401 unless `token` is an RS256 JWT by the App that expires within ten minutes."""
    try:
        claims = jwt.decode(
            token,
            public_key,
            algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False, "require": ["iat", "exp", "iss"]},
        )
    except jwt.InvalidTokenError as exc:
        raise HubError(401, "A JSON web token could not be decoded") from exc
    if str(claims["iss"]) not in (str(state.app_id), state.client_id):
        raise HubError(401, "Integration not found")
    now, exp, iat = state.clock(), claims["exp"], claims["iat"]
    if not isinstance(iat, int | float) or iat > now + CLOCK_DRIFT:
        raise HubError(401, _ISSUED_AT)
    if not isinstance(exp, int | float) or exp <= now:
        raise HubError(401, _EXPIRED)
    if exp > now + JWT_MAX_LIFETIME:
        raise HubError(401, "'Expiration time' claim ('exp') is too far in the future")


def authenticate(
    state: HubState, public_key: RSAPublicKey, operation_id: str, *, kind: AuthKind, value: str
) -> Token | None:
    """The caller's installation token (None for App endpoints, which take the JWT), or 401."""
    if operation_id.startswith("apps/") and operation_id not in _INSTALLATION_APPS_OPERATIONS:
        if kind != "jwt":
            raise HubError(401, "A JSON web token could not be decoded")
        verify_jwt(state, public_key, value)
        return None
    with state.lock:
        token = state.tokens.get(value) if kind == "token" else None
        if token is None or token.expires_at <= state.clock():
            raise HubError(401, "Bad credentials")
        return token
