"""The `auth` block of an mcp_server's config: how Kiwi signs in to a remote server.

    auth:
      type: oauth
      grant: authorization_code        # default; or client_credentials (machine use)
      scopes: [read, write]            # optional: else what the server challenges or lists
      client_id: my-client             # optional: pre-registered (else dynamic registration)
      client_secret: ${MY_SECRET}      # optional; only ever a ${VAR} reference
      private_key: ${MY_KEY_PEM}       # client_credentials with private_key_jwt instead of a secret
      signing_algorithm: RS256         # its JWT algorithm (RS256, ES256, ...)
      client_metadata_url: https://... # optional: a URL client ID (CIMD) when the server takes one
      issuer: https://auth.example     # optional: the only authorization server to trust
      token_endpoint_auth_method: client_secret_basic | client_secret_post | none
      redirect_port: 33418             # optional: the loopback port `kiwi mcp login` listens on

Secrets come only from the runner's environment, so a registry row never holds one, and the
run records scrub them like every other ${VAR} of a config.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ...core.expand import expand_vars
from ...errors import ConfigError

__all__ = ["OAuthConfig", "oauth_config"]

Grant = Literal["authorization_code", "client_credentials"]
_GRANTS: tuple[Grant, ...] = ("authorization_code", "client_credentials")
_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
_KEYS = {
    "type",
    "grant",
    "scopes",
    "client_id",
    "client_secret",
    "client_metadata_url",
    "issuer",
    "token_endpoint_auth_method",
    "redirect_port",
    "client_name",
    "private_key",
    "signing_algorithm",
}
_VAR_ONLY = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_HINT = (
    "config.auth is {type: oauth, grant: authorization_code|client_credentials, scopes, client_id, "
    "client_secret: ${VAR}}"
)


@dataclass(frozen=True)
class OAuthConfig:
    """An `auth: {type: oauth}` block, resolved (client_secret's ${VAR} expanded)."""

    grant: Grant = "authorization_code"
    scopes: tuple[str, ...] = ()
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    issuer: str | None = None
    token_endpoint_auth_method: str | None = None
    redirect_port: int | None = None
    client_name: str = "Kiwi"
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"

    @property
    def scope(self) -> str | None:
        return " ".join(self.scopes) or None

    def fingerprint(self) -> str:
        """Names this configuration (the secret by its hash): a changed one is another session."""
        fields = asdict(self)
        for key in ("client_secret", "private_key"):
            secret = fields.pop(key)
            fields[key] = hashlib.sha256(secret.encode()).hexdigest() if secret else None
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=list).encode()).hexdigest()[:16]


def oauth_config(config: Mapping[str, Any], environ: Mapping[str, str], ref: str) -> OAuthConfig | None:
    """config.auth as an OAuthConfig; None when the server asks for no sign-in."""
    raw = config.get("auth")
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or raw.get("type") != "oauth":
        raise ConfigError(f"{ref}: config.auth must be a mapping with type: oauth, not {raw!r}", hint=_HINT)
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"{ref}: config.auth has unknown keys: {', '.join(unknown)}", hint=_HINT)
    grant = raw.get("grant", "authorization_code")
    if grant not in _GRANTS:
        raise ConfigError(f"{ref}: config.auth.grant must be one of {', '.join(_GRANTS)}, not {grant!r}")
    method = raw.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        raise ConfigError(f"{ref}: config.auth.token_endpoint_auth_method must be one of {', '.join(_AUTH_METHODS)}")
    cfg = OAuthConfig(
        grant=grant,
        scopes=_scopes(raw.get("scopes"), ref),
        client_id=_expanded(_text(raw, "client_id", ref), environ),
        client_secret=_secret(raw, "client_secret", environ, ref),
        private_key=_secret(raw, "private_key", environ, ref),
        signing_algorithm=_text(raw, "signing_algorithm", ref) or "RS256",
        client_metadata_url=_url(raw, "client_metadata_url", ref),
        issuer=_url(raw, "issuer", ref),
        token_endpoint_auth_method=method,
        redirect_port=_port(raw.get("redirect_port"), ref),
        client_name=_text(raw, "client_name", ref) or "Kiwi",
    )
    if grant == "client_credentials" and not (cfg.client_id and (cfg.client_secret or cfg.private_key)):
        raise ConfigError(
            f"{ref}: the client_credentials grant needs config.auth.client_id and client_secret (or private_key)",
            hint="client_secret: ${VAR}, with VAR set in the runner's environment",
        )
    if (cfg.client_secret or cfg.private_key) and not cfg.client_id:
        raise ConfigError(f"{ref}: config.auth has a client secret or key without client_id")
    if cfg.private_key and grant != "client_credentials":
        raise ConfigError(f"{ref}: config.auth.private_key is for the client_credentials grant")
    return cfg


def _scopes(raw: Any, ref: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = raw.split()
    if not isinstance(raw, list) or not all(isinstance(s, str) and s and " " not in s for s in raw):
        raise ConfigError(f"{ref}: config.auth.scopes must be a list of scope names, not {raw!r}")
    return tuple(raw)


def _text(raw: Mapping[str, Any], key: str, ref: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{ref}: config.auth.{key} must be a non-empty string")
    return value


def _expanded(value: str | None, environ: Mapping[str, str]) -> str | None:
    return expand_vars(value, environ) if value is not None else None


def _url(raw: Mapping[str, Any], key: str, ref: str) -> str | None:
    value = _text(raw, key, ref)
    if value is not None and not value.startswith(("http://", "https://")):
        raise ConfigError(f"{ref}: config.auth.{key} must be an http(s) URL, not {value!r}")
    return value


def _secret(auth: Mapping[str, Any], key: str, environ: Mapping[str, str], ref: str) -> str | None:
    raw = auth.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str) or not _VAR_ONLY.match(raw.strip()):
        raise ConfigError(
            f"{ref}: config.auth.{key} must be a ${{VAR}} reference, never the secret itself",
            hint=f"{key}: ${{MY_VARIABLE}}, with the value in the runner's environment",
        )
    name = raw.strip()[2:-1]
    if not environ.get(name):
        raise ConfigError(f"{ref}: config.auth.{key} names ${{{name}}}, which is not set")
    return expand_vars(raw.strip(), environ)


def _port(raw: Any, ref: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 65535:
        raise ConfigError(f"{ref}: config.auth.redirect_port must be a port number, not {raw!r}")
    return raw
