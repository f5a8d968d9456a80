"""The SDK's OAuth provider for a server's `auth` config, and one per caller for the pool.

`make_provider` picks the SDK's class for the grant: `OAuthClientProvider` (authorization
code with PKCE; dynamic registration, a client ID metadata document, or a pre-registered
client; refresh) or `ClientCredentialsOAuthProvider` (machine use). The protocol is all the
SDK's; Kiwi supplies the storage and what happens at the browser step.

`OAuthSessions.apply` is what the mcp_tool handler and the importer call: for a server whose
config asks for OAuth it gives the pool's ServerSpec an httpx2 auth of the calling user, and a
session key of its own (one user's session never carries another user's token). A run has
nobody at a browser: when the server wants a person to sign in, the call fails with
LoginRequired, naming `kiwi mcp login SERVER`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from ...errors import ConfigError, Refused
from ...principal import requested
from ..pool import ServerSpec
from .config import OAuthConfig, oauth_config
from .crypto import cipher_from
from .storage import DatabaseTokenStorage, MemoryTokenStorage

if TYPE_CHECKING:
    from ...registry.base import Registry

__all__ = [
    "NO_BROWSER_REDIRECT",
    "LoginRequired",
    "OAuthSessions",
    "make_provider",
    "preregistered_client",
    "storage_key",
]

RedirectHandler = Callable[[str], Awaitable[None]]
CallbackHandler = Callable[[], Awaitable[AuthorizationCodeResult]]
# The redirect URI of a provider that never sends anyone to a browser (a run): never visited.
NO_BROWSER_REDIRECT = "http://127.0.0.1/kiwi/oauth/callback"
_MAX_PROVIDERS = 1024


class LoginRequired(Refused):
    """The server wants a person to sign in, and this call has none to ask."""

    kind = "login_required"


def make_provider(
    cfg: OAuthConfig,
    server_url: str,
    storage: TokenStorage,
    *,
    redirect_uri: str = NO_BROWSER_REDIRECT,
    redirect_handler: RedirectHandler | None = None,
    callback_handler: CallbackHandler | None = None,
) -> OAuthClientProvider:
    """The SDK's provider for `cfg`. A pre-registered client_id (authorization code) is served
    from `storage` wrapped so that it is always that client."""
    if cfg.grant == "client_credentials":
        assert cfg.client_id and (cfg.client_secret or cfg.private_key)
        with warnings.catch_warnings():  # no issuer: the SDK warns that one will be required
            warnings.simplefilter("ignore")
            if cfg.private_key:
                signer = SignedJWTParameters(
                    issuer=cfg.client_id,
                    subject=cfg.client_id,
                    signing_key=cfg.private_key,
                    signing_algorithm=cfg.signing_algorithm,
                )
                return _KeyProvider(
                    server_url,
                    storage,
                    cfg.client_id,
                    signer.create_assertion_provider(),
                    scope=cfg.scope,
                    issuer=cfg.issuer,
                )
            assert cfg.client_secret
            return _SecretProvider(
                server_url,
                storage,
                cfg.client_id,
                cfg.client_secret,
                token_endpoint_auth_method=_secret_method(cfg),
                scope=cfg.scope,
                issuer=cfg.issuer,
            )
    method = cfg.token_endpoint_auth_method or ("client_secret_basic" if cfg.client_secret else "none")
    metadata = OAuthClientMetadata(
        client_name=cfg.client_name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic coerces the URL
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=method,  # type: ignore[arg-type]
        scope=cfg.scope,
    )
    if cfg.client_id:
        storage = _Preregistered(storage, preregistered_client(cfg, redirect_uri))
    return _CodeProvider(
        server_url,
        metadata,
        storage,
        redirect_handler=redirect_handler or _no_browser(server_url),
        callback_handler=callback_handler or _no_callback,
        client_metadata_url=cfg.client_metadata_url,
    )


class _StoredExpiry:
    """Tokens loaded from storage keep their expiry (the SDK's own loading forgets it, so a
    token stored before a restart would be sent until the server refuses it, and a refusal
    means a new sign-in rather than a refresh)."""

    context: Any

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)


class _CodeProvider(_StoredExpiry, OAuthClientProvider):
    pass


class _SecretProvider(_StoredExpiry, ClientCredentialsOAuthProvider):
    pass


class _KeyProvider(_StoredExpiry, PrivateKeyJWTOAuthProvider):
    pass


def preregistered_client(cfg: OAuthConfig, redirect_uri: str) -> OAuthClientInformationFull:
    assert cfg.client_id
    return OAuthClientInformationFull(
        client_id=cfg.client_id,
        client_secret=cfg.client_secret,
        redirect_uris=[AnyUrl(redirect_uri)],
        token_endpoint_auth_method=cfg.token_endpoint_auth_method
        or ("client_secret_basic" if cfg.client_secret else "none"),
        issuer=cfg.issuer,
    )


def _secret_method(cfg: OAuthConfig) -> Any:
    method = cfg.token_endpoint_auth_method or "client_secret_basic"
    if method == "none":
        raise ConfigError("the client_credentials grant authenticates the client: token_endpoint_auth_method none")
    return method


class _Preregistered:
    """A storage whose client registration is the configured one, whatever it holds."""

    def __init__(self, inner: TokenStorage, client: OAuthClientInformationFull) -> None:
        self.inner = inner
        self._client = client

    async def get_tokens(self) -> Any:
        return await self.inner.get_tokens()

    async def set_tokens(self, tokens: Any) -> None:
        await self.inner.set_tokens(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info  # kept for this process; the configuration stays the source


def _no_browser(server_url: str) -> RedirectHandler:
    async def refuse(authorization_url: str) -> None:
        raise LoginRequired(
            f"the MCP server at {server_url} wants you to sign in (no valid token is stored for you)",
            hint="run `kiwi mcp login SERVER` once, as the user this call acts as",
        )

    return refuse


async def _no_callback() -> AuthorizationCodeResult:
    raise LoginRequired("no authorization code: nobody was sent to sign in")


class OAuthSessions:
    """Providers by (server session, caller): the mcp_tool handler's half of OAuth."""

    def __init__(self) -> None:
        self._specs: dict[tuple[str, str], ServerSpec] = {}

    def apply(
        self,
        spec: ServerSpec,
        config: Mapping[str, Any],
        environ: Mapping[str, str],
        registry: Registry | None,
        key_environ: Mapping[str, str] | None = None,
    ) -> ServerSpec:
        """`spec` as is when the server asks for no OAuth; else with the caller's auth and key.
        `environ`: what the plan's config may read (its allowed variables); `key_environ`: the
        runner's own environment, where its token key (KIWI_TOKEN_KEY) lives (default: environ)."""
        auth = config.get("auth")
        if not isinstance(auth, Mapping) or auth.get("type") != "oauth":
            return spec  # no sign-in (another auth type is the http_client primitive's, not the pool's)
        caller = registry.backend.caller() if registry is not None else "nobody"
        cached = self._specs.get((spec.key, caller))
        if cached is not None:
            return cached
        cfg = oauth_config(config, environ, spec.ref)
        assert cfg is not None
        if spec.transport == "stdio" or spec.url is None:
            raise ConfigError(f"{spec.ref}: config.auth applies to remote servers (streamable_http, sse), not stdio")
        storage = _storage_for(cfg, spec.url, environ if key_environ is None else key_environ, registry)
        provider = make_provider(cfg, spec.url, storage)
        who = hashlib.sha256(caller.encode()).hexdigest()[:16]
        authed = dataclasses.replace(spec, key=f"{spec.key}:oauth:{cfg.fingerprint()}:{who}", auth=provider)
        if len(self._specs) >= _MAX_PROVIDERS:
            self._specs.clear()
        self._specs[(spec.key, caller)] = authed
        return authed


def _storage_for(cfg: OAuthConfig, url: str, environ: Mapping[str, str], registry: Registry | None) -> TokenStorage:
    """The caller's database row; in memory for client credentials when there is no user
    to keep it for (an admin, or no registry): such tokens can be fetched again at will."""
    principal = requested() or getattr(getattr(registry, "backend", None), "principal", None)
    has_user = registry is not None and (principal is None or principal.user_id is not None)
    if cfg.grant == "client_credentials" and not has_user:
        return MemoryTokenStorage()
    if registry is None:
        raise ConfigError(f"{url}: OAuth tokens are kept in the registry, and this runner has none")
    return DatabaseTokenStorage(registry, storage_key(cfg, url), cipher_from(environ), principal=requested())


def storage_key(cfg: OAuthConfig, url: str) -> str:
    """Which stored row a server's tokens are: its URL, and the grant and client they were
    issued to (two mcp_server rows of one URL signing in differently keep apart; rows that
    sign in alike share one login)."""
    return f"{url}#{cfg.grant}:{cfg.client_id or 'registered'}"
