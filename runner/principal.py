"""Who a request acts as: the principal whose role and JWT claims every SQL statement carries.

Kiwi never answers a request as its own database login. Each request names a principal,
and the registry runs that request's SQL as the principal's role (`anon`,
`authenticated` or `service_role`) with `request.jwt.claims` set to its claims, the way
PostgREST does, so that row-level security and the namespace rules decide.

    anon()          nobody signed in: reads what is public
    local_owner()   the local stack's owner (a signed-in user who owns namespace `local`),
                    the CLI's default on the Postgres backend when no token is given
    admin()         service_role: an explicit choice (`kiwi --admin`, `kiwi serve --admin`),
                    never a default
    from_token(t)   a Supabase Auth JWT (KIWI_ACCESS_TOKEN, or an HTTP bearer), verified

A token is held to what Supabase Auth issues: a user's access token (role `authenticated`)
carries the audience `authenticated` (another when the deployment's tokens carry another:
KIWI_JWT_AUDIENCE) and lives at most DEFAULT_MAX_LIFETIME_S (Supabase's default is an hour,
its maximum a week; KIWI_JWT_MAX_LIFETIME): `exp - iat`, and `exp - now` (which also judges a
token without `iat`). The project's API keys (role `anon` or `service_role`, no user) are
long-lived by design and carry no audience: they are checked for their signature and `exp`,
and an audience they do carry must be the expected one.

`acting_as(p)` makes `p` the principal of everything the current task (and the tasks it
starts) asks of the registry; a registry asked outside any `acting_as` uses the principal
it was made with.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import Refused, UsageError

if TYPE_CHECKING:
    from jwt.types import Options

__all__ = [
    "API_KEY_ROLES",
    "DEFAULT_AUDIENCE",
    "DEFAULT_MAX_LIFETIME_S",
    "LOCAL_ISSUER",
    "LOCAL_JWT_SECRET",
    "LOCAL_NAMESPACE",
    "LOCAL_OWNER_ID",
    "ROLES",
    "Principal",
    "acting_as",
    "admin",
    "anon",
    "current",
    "from_claims",
    "from_token",
    "local_owner",
    "requested",
]

ROLES = ("anon", "authenticated", "service_role")
# The local stack's owner: a fixed id (uuid5 of "kiwi:local-owner"), so the CLI knows it
# without a file; scripts/stack makes it the owner of namespace `local`
# (supabase/local_owner.sql). Anyone holding the runner's database password can already
# SET ROLE to service_role, so a well-known id gives away nothing the password does not.
LOCAL_OWNER_ID = "866e9377-288f-586a-84f4-9598007609a5"
LOCAL_NAMESPACE = "local"
# The Supabase CLI's default JWT secret for local projects: the local stack's tokens are
# signed with it, as `supabase start` signs its own.
LOCAL_JWT_SECRET = "super-secret-jwt-token-with-at-least-32-characters-long"
# The `iss` of what the local stack's owner and `kiwi token` sign, where no authorization server
# issues tokens (the local stack runs no Supabase Auth)
LOCAL_ISSUER = "kiwi-local"
# What Supabase Auth puts in a user's access token, and the longest life Kiwi accepts for one
DEFAULT_AUDIENCE = "authenticated"
DEFAULT_MAX_LIFETIME_S = 24 * 3600
# The roles of the project's API keys (the anon and service keys): long-lived, no audience
API_KEY_ROLES = ("anon", "service_role")


@dataclass(frozen=True, eq=False)
class Principal:
    """A role and the JWT claims its requests carry (`sub` is the user's id, if any). Two
    principals are equal when their role and claims are."""

    role: str
    claims: Mapping[str, Any]
    source: str  # how it was chosen: "token", "local owner", "admin", "anon"
    token: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise Refused(f"role {self.role!r} is not one Kiwi acts as", hint="roles: " + ", ".join(ROLES))

    @property
    def user_id(self) -> str | None:
        sub = self.claims.get("sub")
        return str(sub) if sub else None

    @property
    def is_admin(self) -> bool:
        return self.role == "service_role"

    @functools.cached_property
    def claims_json(self) -> str:
        """The claims as `request.jwt.claims` holds them (also the key of a connection's state)."""
        return json.dumps(dict(self.claims), sort_keys=True, separators=(",", ":"), default=str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Principal) and (self.role, self.claims_json) == (other.role, other.claims_json)

    def __hash__(self) -> int:
        return hash((self.role, self.claims_json))

    def describe(self) -> str:
        who = f"user {self.user_id}" if self.user_id else self.role
        return f"{who} ({self.role}, {self.source})"


def anon() -> Principal:
    return Principal("anon", {"role": "anon"}, "anon")


def admin() -> Principal:
    return Principal("service_role", {"role": "service_role"}, "admin")


def local_owner() -> Principal:
    claims = {"sub": LOCAL_OWNER_ID, "role": "authenticated", "aud": "authenticated", "iss": LOCAL_ISSUER}
    return Principal("authenticated", claims, "local owner")


def from_claims(claims: Mapping[str, Any], *, token: str | None = None, source: str = "token") -> Principal:
    """The principal verified claims describe; a signed-in role must name its user (`sub`)."""
    role = claims.get("role")
    if role not in ROLES:
        raise Refused(
            f"the token's role {role!r} is not one Kiwi acts as",
            hint="use a Supabase Auth access token (role authenticated) or the project's anon or service key",
        )
    if role == "authenticated":
        try:
            uuid.UUID(str(claims.get("sub")))
        except ValueError:
            raise Refused(
                "the token names no user: its sub claim is not a user id", hint="sign in again for a fresh token"
            ) from None
    return Principal(role, dict(claims), source, token)


def from_token(
    token: str,
    *,
    secret: str | None,
    jwks_url: str | None = None,
    audience: str | None = DEFAULT_AUDIENCE,
    max_lifetime_s: float | None = DEFAULT_MAX_LIFETIME_S,
    leeway_s: float = 30.0,
) -> Principal:
    """Verify a Supabase Auth JWT (HS256 with the project's secret, or a key of the project's
    JWKS) and return its principal. Expired, forged or malformed tokens are Refused, and so is
    a user's token for another audience or living longer than `max_lifetime_s` (module
    docstring; None turns either check off, for callers embedding Kiwi that judge it themselves).

    An HTTP client sends the same bearer with every request, and verifying it (PyJWT checks
    each base64 character in Python) cost about half a millisecond a request. So the claims of
    a token verified once are kept, keyed by the exact token and the verifier's settings, and
    reused until the token's exp (with the same leeway) has passed. A forged or altered token
    is a different string and is verified afresh."""
    token = token.strip()
    if token.lower().startswith("bearer "):
        token = token[7:].strip()
    key = (token, secret, jwks_url, audience, max_lifetime_s, leeway_s)
    claims = _verified.get(key)
    if claims is not None:
        if time.time() <= float(claims["exp"]) + leeway_s:
            return from_claims(claims, token=token)
        del _verified[key]
        raise Refused("the access token has expired", hint="sign in again (or refresh) for a new token")
    claims = _verify(token, secret=secret, jwks_url=jwks_url, leeway_s=leeway_s)
    principal = from_claims(claims, token=token)
    _check_audience(claims, audience)
    _check_lifetime(claims, max_lifetime_s, leeway_s)
    if len(_verified) >= _VERIFIED_MAX:
        del _verified[next(iter(_verified))]  # the oldest
    _verified[key] = claims
    return principal


_VERIFIED_MAX = 1024


def forget_verified_tokens() -> None:
    """Empty the verified-token cache (each token is verified again at its next use): a server
    giving memory back after a burst of callers drops what their tokens left scattered."""
    _verified.clear()


_verified: dict[tuple[str, str | None, str | None, str | None, float | None, float], dict[str, Any]] = {}


def _check_audience(claims: Mapping[str, Any], audience: str | None) -> None:
    """A user's token names `audience` in its `aud` (a string, or a list holding it); an API key
    may name none, but not another."""
    if audience is None:
        return
    aud = claims.get("aud")
    if aud is None and claims.get("role") in API_KEY_ROLES:
        return
    named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if audience in named:
        return
    what = "names no audience (aud)" if aud is None else f"is for the audience {aud!r}"
    raise Refused(
        f"the access token {what}; this server accepts tokens for {audience!r}",
        hint="use an access token this project's Supabase Auth issued; a deployment whose tokens carry "
        "another audience sets KIWI_JWT_AUDIENCE (config.toml [auth] audience)",
    )


def _check_lifetime(claims: Mapping[str, Any], max_lifetime_s: float | None, leeway_s: float) -> None:
    """A user's token lives at most `max_lifetime_s`: from its iat to its exp, and from now to its
    exp (which judges a token without iat too). API keys are long-lived by design."""
    if max_lifetime_s is None or claims.get("role") in API_KEY_ROLES:
        return
    exp = float(claims["exp"])
    iat = claims.get("iat")
    issued_at = float(iat) if isinstance(iat, int | float) and not isinstance(iat, bool) else None
    issued = issued_at is not None
    lifetime = exp - (issued_at if issued_at is not None else time.time())
    if lifetime <= max_lifetime_s + (0 if issued else leeway_s):
        return
    said = "is valid for" if issued else "is valid for another"
    raise Refused(
        f"the access token {said} {_duration(lifetime)}, longer than the {_duration(max_lifetime_s)} "
        "this server accepts",
        hint="sign in again (or refresh) for a token of a shorter life (Supabase Auth: JWT expiry); "
        "KIWI_JWT_MAX_LIFETIME (config.toml [auth] max_lifetime) sets the maximum, in seconds",
    )


def _duration(seconds: float) -> str:
    """A lifetime as people say it: 90 s, 2 h, 7 d, 2.9e+12 d."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} d"


def _verify(token: str, *, secret: str | None, jwks_url: str | None, leeway_s: float) -> dict[str, Any]:
    """The claims of `token` once its signature and exp check out (else Refused); its audience
    and lifetime are judged by the caller, once the role they depend on is known."""
    import jwt  # only when a token is given: `kiwi run` as the local owner never pays for it

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise Refused(f"the access token is not a JWT: {e}", hint="give the access_token a sign-in returned") from None
    alg = header.get("alg")
    options: Options = {"require": ["exp"], "verify_aud": False}
    try:
        if alg == "HS256":
            if not secret:
                raise UsageError(
                    "cannot verify the access token: no JWT secret is configured",
                    hint="set KIWI_JWT_SECRET to the project's JWT secret (Supabase dashboard: Settings, API)",
                )
            claims = jwt.decode(token, secret, algorithms=["HS256"], leeway=leeway_s, options=options)
        elif alg in ("RS256", "ES256", "EdDSA") and jwks_url:
            key = _jwks_client(jwks_url).get_signing_key_from_jwt(token).key
            claims = jwt.decode(token, key, algorithms=[alg], leeway=leeway_s, options=options)
        else:
            raise Refused(
                f"the access token is signed with {alg!r}, which this server cannot verify",
                hint="HS256 needs KIWI_JWT_SECRET; RS256/ES256 need the project's JWKS (SUPABASE_URL or KIWI_JWKS_URL)",
            )
    except jwt.ExpiredSignatureError:
        raise Refused("the access token has expired", hint="sign in again (or refresh) for a new token") from None
    except jwt.PyJWTError as e:
        raise Refused(f"the access token was refused: {e}", hint="use a token this project signed") from None
    return dict(claims)


_jwks_clients: dict[str, Any] = {}


def _jwks_client(url: str) -> Any:
    from jwt import PyJWKClient

    client = _jwks_clients.get(url)
    if client is None:
        client = _jwks_clients[url] = PyJWKClient(url, cache_keys=True, lifespan=300)
    return client


def sign(claims: Mapping[str, Any], secret: str, *, expires_in_s: int = 3600) -> str:
    """A HS256 JWT of `claims` (with iat and exp): the local stack's tokens, and tests'."""
    import jwt

    now = int(time.time())
    return jwt.encode({"iat": now, "exp": now + expires_in_s, **claims}, secret, algorithm="HS256")


_current: ContextVar[Principal | None] = ContextVar("kiwi_principal", default=None)


@contextlib.contextmanager
def acting_as(principal: Principal | None) -> Iterator[Principal | None]:
    """Within the block (and the tasks it starts), the registry acts as `principal` (None: as
    the principal the registry was made with)."""
    reset = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(reset)


def requested() -> Principal | None:
    """The principal `acting_as` set for the running task, if any (for work done later on its
    behalf, such as a run record written in a batch)."""
    return _current.get()


def current(default: Principal) -> Principal:
    """The principal of the running request, else `default`."""
    found = _current.get()
    return default if found is None else found
