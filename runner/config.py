"""Runner settings: environment first, then config.toml, then the local defaults.

Environment variables:
  KIWI_DATABASE_URL        direct Postgres backend (default: the local stack, the runner's login
                           on 127.0.0.1:KIWI_DB_PORT)
  KIWI_DB_PORT             the local stack's port (default DEFAULT_DB_PORT: runner/stack_port.py), the same
                           setting scripts/stack, make and the tests read
  SUPABASE_URL, SUPABASE_KEY (or SUPABASE_SERVICE_ROLE_KEY / SUPABASE_ANON_KEY)
                           the Supabase REST backend, used when KIWI_BACKEND=rest or
                           when SUPABASE_URL is set and KIWI_DATABASE_URL is not
  KIWI_CACHE_DIR           materialised tools and prepared environments
  KIWI_CONFIG              path of config.toml (default: ./config.toml, if present)
  KIWI_PROJECT_DIR         the project (its .ai/tools space and kiwi.lock); default: the
                           nearest directory from here up holding .ai/ or kiwi.lock, else here
  KIWI_USER_SPACE          the user space of local tools (default: ~/.ai/tools)
  KIWI_KEYS_DIR            signing keys (default: ~/.config/kiwi/keys)
  KIWI_TRUST_POLICY        off | warn | require (default: config.toml [trust] policy, else off)
  KIWI_ACCESS_TOKEN        act as this signed-in user (a Supabase Auth JWT); without it the
                           Postgres backend acts as the local stack's owner, REST as anon
  KIWI_ADMIN               1: act as service_role (admin), like `kiwi --admin`; never a default
  KIWI_JWT_SECRET          the project's JWT secret (also SUPABASE_JWT_SECRET), to verify
                           tokens; default: the local stack's, when the database is local
  KIWI_JWKS_URL            the project's JWKS, to verify asymmetric tokens (default with
                           SUPABASE_URL: <SUPABASE_URL>/auth/v1/.well-known/jwks.json)
  KIWI_AUTH_ISSUER         the authorization server that issues the project's tokens (default
                           with SUPABASE_URL: <SUPABASE_URL>/auth/v1; none on the local stack)
  KIWI_JWT_AUDIENCE        the audience (`aud`) a user's token must carry (default
                           authenticated, as Supabase Auth issues them; [auth] audience)
  KIWI_JWT_MAX_LIFETIME    the longest life, in seconds, of a user's token (exp - iat, and
                           exp - now) (default 86400, a day; [auth] max_lifetime)
  KIWI_SESSION_IDLE_TIMEOUT  `kiwi serve --transport http`: seconds an MCP session may go
                           unused before it is closed (default 600; [serve] session_idle_timeout)
  KIWI_MAX_SESSIONS_PER_USER  `kiwi serve --transport http`: live MCP sessions per caller
                           (default 64; [serve] max_sessions_per_user)
  KIWI_EMBEDDINGS          the model that embeds tools and queries for search: local (default:
                           the bundled wordllama model, no download) | openai (an
                           OpenAI-compatible embeddings API) | off (search by words only)
  KIWI_EMBEDDINGS_URL      openai: the API's base URL (default https://api.openai.com/v1)
  KIWI_EMBEDDINGS_MODEL    openai: the model (default text-embedding-3-small; asked for 256 dimensions)
  KIWI_SANDBOX             on (default) | off: every process a tool starts runs in a bubblewrap
                           sandbox (runner/sandbox/); off only on a trusted single-user machine
                           (`kiwi serve --transport http` refuses to start with it)
  KIWI_EMBEDDINGS_KEY      openai: the API key, written as ${VAR} (e.g. ${OPENAI_API_KEY}) and read
                           from that variable; never logged
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .principal import (
    DEFAULT_AUDIENCE,
    DEFAULT_MAX_LIFETIME_S,
    LOCAL_JWT_SECRET,
    Principal,
    anon,
    from_token,
    local_owner,
)
from .principal import admin as principal_admin
from .stack_port import DEFAULT_DB_PORT

# The local stack (scripts/stack): PostgreSQL on 127.0.0.1 at KIWI_DB_PORT, else this port; the
# one place Python holds it (scripts/stack holds the shell's).
# Its two logins: the runner's (supabase/local_runner_login.sql), not a superuser, which can only
# SET ROLE to anon, authenticated and service_role as each request's principal asks; and the
# superuser's, for resets, psql and the tests' fixtures.
STACK_RUNNER_LOGIN = "kiwi_runner:kiwi_runner"
STACK_SUPERUSER_LOGIN = "postgres:postgres"
TRUST_POLICIES = ("off", "warn", "require")
EMBEDDINGS = ("local", "off", "openai")  # KIWI_EMBEDDINGS: the models of runner/search/embedders.py
DEFAULT_EMBEDDINGS_URL = "https://api.openai.com/v1"
DEFAULT_EMBEDDINGS_MODEL = "text-embedding-3-small"
LOCKFILE_NAME = "kiwi.lock"
# `kiwi serve --transport http`: an MCP session unused this long is closed, and a caller holds
# at most this many live sessions (the oldest idle one makes room for a new one)
DEFAULT_SESSION_IDLE_S = 600.0
DEFAULT_MAX_SESSIONS_PER_USER = 64


@dataclass(frozen=True)
class TrustSettings:
    """Which signatures the runner accepts: `keys` maps a namespace (or "*", any namespace)
    to the Ed25519 public keys (base64) trusted to sign its tools. With policy "require"
    every element of a chain must carry a valid signature by a trusted key; "warn" runs
    anyway and says what is missing; "off" does not check."""

    policy: str = "off"
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def keys_for(self, namespace: str) -> tuple[str, ...]:
        return (*self.keys.get(namespace, ()), *self.keys.get("*", ()))


@dataclass(frozen=True)
class Settings:
    backend: str  # "postgres" | "rest"
    database_url: str
    supabase_url: str | None
    supabase_key: str | None
    cache_dir: Path
    # a signed-in user's access token (JWT) for the REST backend: requests then run as that
    # user (RLS, their namespaces), with supabase_key (the anon key) as the apikey
    supabase_access_token: str | None = field(default=None, repr=False)
    record_runs: bool = True
    # a run's record keeps its parameters, output and stderr, masked and capped (core/payloads.py)
    run_payloads: bool = True
    # an output larger than this (bytes, as JSON) of a run in a project is written to
    # .ai/outputs/tools/<tool>/ and the result points at it; the last keep_outputs are kept
    large_output_bytes: int = 65536
    keep_outputs: int = 10
    project_dir: Path = field(default_factory=Path.cwd)
    user_space: Path = field(default_factory=lambda: Path.home() / ".ai" / "tools")
    keys_dir: Path = field(default_factory=lambda: Path.home() / ".config" / "kiwi" / "keys")
    trust: TrustSettings = field(default_factory=TrustSettings)
    # who requests act as (runner/principal.py): explicit admin, else the token, else the default
    admin: bool = False
    jwt_secret: str | None = field(default=None, repr=False)
    jwks_url: str | None = None
    # what a user's token must carry: the audience, and a life no longer than this (principal.py)
    jwt_audience: str = DEFAULT_AUDIENCE
    jwt_max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S
    # `kiwi serve --transport http`: an idle MCP session's life, and live sessions per caller
    session_idle_s: float = DEFAULT_SESSION_IDLE_S
    max_sessions_per_user: int = DEFAULT_MAX_SESSIONS_PER_USER
    # `kiwi serve` runs a local space's tools only when asked ([serve] local_spaces = true,
    # or --local-spaces): a server's callers did not choose the directory it runs in
    serve_local_spaces: bool = False
    # search's embedding model (runner/search/embedders.py): local | openai | off; for openai the
    # API's base URL, its model, and its key as written (a ${VAR}, expanded by the embedder)
    embeddings: str = "local"
    embeddings_url: str = DEFAULT_EMBEDDINGS_URL
    embeddings_model: str = DEFAULT_EMBEDDINGS_MODEL
    embeddings_key: str | None = field(default=None, repr=False)
    # every process a tool starts runs sandboxed (runner/sandbox/); False is the explicit opt-out
    sandbox: bool = True

    @property
    def project_space(self) -> Path:
        return self.project_dir / ".ai" / "tools"

    @property
    def lockfile(self) -> Path:
        return self.project_dir / LOCKFILE_NAME

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, config_path: Path | None = None) -> Settings:
        env = os.environ if environ is None else environ
        file = _read_config(config_path or Path(env.get("KIWI_CONFIG", "config.toml")))
        db = file.get("database", {})
        rest = file.get("supabase", {})
        cache = file.get("cache", {})
        runs = file.get("runs", {})
        auth = file.get("auth", {})
        serve = file.get("serve", {})
        embed = file.get("embeddings", {})
        supabase_url = env.get("SUPABASE_URL") or rest.get("url")
        supabase_key = (
            env.get("SUPABASE_KEY")
            or env.get("SUPABASE_SERVICE_ROLE_KEY")
            or env.get("SUPABASE_ANON_KEY")
            or rest.get("key")
        )
        explicit_db = env.get("KIWI_DATABASE_URL") or db.get("url")
        backend = env.get("KIWI_BACKEND") or file.get("backend")
        if backend is None:
            backend = "rest" if supabase_url and not explicit_db else "postgres"
        if backend not in ("postgres", "rest"):
            raise UsageError(f"unknown backend {backend!r}", hint="KIWI_BACKEND is postgres or rest")
        if backend == "rest" and not (supabase_url and supabase_key):
            raise UsageError(
                "the rest backend needs SUPABASE_URL and a key",
                hint="set SUPABASE_URL and SUPABASE_KEY (or SUPABASE_ANON_KEY)",
            )
        cache_dir = Path(env.get("KIWI_CACHE_DIR") or cache.get("dir") or _default_cache(env)).expanduser()
        home = Path(env.get("HOME") or Path.home())
        embeddings = str(env.get("KIWI_EMBEDDINGS") or embed.get("provider") or "local").strip().lower()
        if embeddings not in EMBEDDINGS:
            raise UsageError(
                f"unknown KIWI_EMBEDDINGS {embeddings!r}", hint="KIWI_EMBEDDINGS is one of: " + ", ".join(EMBEDDINGS)
            )
        return cls(
            backend=backend,
            database_url=explicit_db or stack_database_url(env),
            supabase_url=supabase_url,
            supabase_key=supabase_key,
            supabase_access_token=env.get("KIWI_ACCESS_TOKEN") or None,
            cache_dir=cache_dir,
            record_runs=bool(runs.get("record", True)),
            run_payloads=_switch(env.get("KIWI_RUN_PAYLOADS"), runs, "payloads", "KIWI_RUN_PAYLOADS", "[runs]"),
            large_output_bytes=int(
                _number(
                    env.get("KIWI_LARGE_OUTPUT_BYTES"),
                    runs.get("large_output_bytes"),
                    65536,
                    "KIWI_LARGE_OUTPUT_BYTES",
                    whole=True,
                )
            ),
            keep_outputs=int(
                _number(env.get("KIWI_KEEP_OUTPUTS"), runs.get("keep_outputs"), 10, "KIWI_KEEP_OUTPUTS", whole=True)
            ),
            project_dir=_project_dir(env),
            user_space=Path(env.get("KIWI_USER_SPACE") or home / ".ai" / "tools").expanduser(),
            keys_dir=Path(env.get("KIWI_KEYS_DIR") or home / ".config" / "kiwi" / "keys").expanduser(),
            trust=_trust(file.get("trust", {}), env.get("KIWI_TRUST_POLICY")),
            admin=_flag(env.get("KIWI_ADMIN"), "KIWI_ADMIN"),
            jwt_secret=env.get("KIWI_JWT_SECRET")
            or env.get("SUPABASE_JWT_SECRET")
            or (LOCAL_JWT_SECRET if _is_local(explicit_db or stack_database_url(env)) else None),
            jwks_url=env.get("KIWI_JWKS_URL")
            or auth.get("jwks_url")
            or (f"{supabase_url.rstrip('/')}/auth/v1/.well-known/jwks.json" if supabase_url else None),
            jwt_audience=_text(
                env.get("KIWI_JWT_AUDIENCE"), auth.get("audience"), DEFAULT_AUDIENCE, "KIWI_JWT_AUDIENCE"
            ),
            jwt_max_lifetime_s=_number(
                env.get("KIWI_JWT_MAX_LIFETIME"),
                auth.get("max_lifetime"),
                DEFAULT_MAX_LIFETIME_S,
                "KIWI_JWT_MAX_LIFETIME",
            ),
            session_idle_s=_number(
                env.get("KIWI_SESSION_IDLE_TIMEOUT"),
                serve.get("session_idle_timeout"),
                DEFAULT_SESSION_IDLE_S,
                "KIWI_SESSION_IDLE_TIMEOUT",
            ),
            max_sessions_per_user=int(
                _number(
                    env.get("KIWI_MAX_SESSIONS_PER_USER"),
                    serve.get("max_sessions_per_user"),
                    DEFAULT_MAX_SESSIONS_PER_USER,
                    "KIWI_MAX_SESSIONS_PER_USER",
                    whole=True,
                )
            ),
            serve_local_spaces=serve.get("local_spaces") is True,
            embeddings=embeddings,
            embeddings_url=env.get("KIWI_EMBEDDINGS_URL") or embed.get("url") or DEFAULT_EMBEDDINGS_URL,
            embeddings_model=env.get("KIWI_EMBEDDINGS_MODEL") or embed.get("model") or DEFAULT_EMBEDDINGS_MODEL,
            # a ${VAR} reference, expanded when the embedder is made: the file names the key, never holds it
            embeddings_key=env.get("KIWI_EMBEDDINGS_KEY") or embed.get("key") or None,
            sandbox=_switch(env.get("KIWI_SANDBOX"), file.get("sandbox", {}), "enabled", "KIWI_SANDBOX", "[sandbox]"),
        )

    def principal(self) -> Principal:
        """Who this process acts as: admin when chosen explicitly, else the access token's user,
        else the local stack's owner (Postgres backend) or anon (REST)."""
        if self.admin:
            return principal_admin()
        if self.supabase_access_token:
            return from_token(
                self.supabase_access_token,
                secret=self.jwt_secret,
                jwks_url=self.jwks_url,
                audience=self.jwt_audience,
                max_lifetime_s=self.jwt_max_lifetime_s,
            )
        return local_owner() if self.backend == "postgres" else anon()

    def auth_issuer(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The authorization server that issues this project's tokens: KIWI_AUTH_ISSUER, else the
        project's Supabase Auth (`<SUPABASE_URL>/auth/v1`), else None: the local stack runs no
        Supabase Auth, and its tokens come from `kiwi token`."""
        env = os.environ if environ is None else environ
        explicit = (env.get("KIWI_AUTH_ISSUER") or "").strip()
        if explicit:
            return explicit.rstrip("/")
        if self.supabase_url:
            return self.supabase_url.rstrip("/") + "/auth/v1"
        return None


def stack_port(environ: Mapping[str, str] | None = None) -> int:
    """The local stack's port: KIWI_DB_PORT, else DEFAULT_DB_PORT. One setting, so kiwi never
    talks to a server on a port the stack does not use."""
    env = os.environ if environ is None else environ
    raw = (env.get("KIWI_DB_PORT") or "").strip()
    if not raw:
        return DEFAULT_DB_PORT
    if not (raw.isascii() and raw.isdigit() and not raw.startswith("0") and int(raw) <= 65535):
        raise UsageError(
            f"KIWI_DB_PORT={raw!r} is not a port number",
            hint="KIWI_DB_PORT is the local stack's port, 1-65535 (unset: " + str(DEFAULT_DB_PORT) + ")",
        )
    return int(raw)


def stack_database_url(environ: Mapping[str, str] | None = None, login: str = STACK_RUNNER_LOGIN) -> str:
    """The local stack's database URL on its port (stack_port), as `login` (the runner's by
    default): kiwi's default when no KIWI_DATABASE_URL is set."""
    return f"postgresql://{login}@127.0.0.1:{stack_port(environ)}/postgres"


def _flag(value: str | None, name: str) -> bool:
    if value is None or value.strip().lower() in ("", "0", "false", "no"):
        return False
    if value.strip().lower() in ("1", "true", "yes"):
        return True
    raise UsageError(f"{name}={value!r} is not a yes or no", hint=f"{name}=1 to turn it on, 0 (or unset) for off")


def _text(value: str | None, configured: Any, default: str, name: str) -> str:
    """A setting that is a non-empty string: the environment's, else config.toml's, else the default."""
    chosen = value if value is not None else configured
    if chosen is None:
        return default
    if not isinstance(chosen, str) or not chosen.strip():
        raise UsageError(f"{name}={chosen!r} is not a non-empty string", hint=f"unset {name} for {default!r}")
    return chosen.strip()


def _number(value: str | None, configured: Any, default: float, name: str, *, whole: bool = False) -> float:
    """A positive, finite setting (a whole number if `whole`): the environment's, else
    config.toml's, else the default; anything else is a UsageError naming it."""
    chosen: Any = value if value is not None else configured
    if chosen is None:
        return default
    kind = "a whole number" if whole else "a number"
    try:
        if isinstance(chosen, bool):
            raise ValueError(chosen)
        number = float(chosen.strip()) if isinstance(chosen, str) else float(chosen)
    except (TypeError, ValueError):
        raise UsageError(f"{name}={chosen!r} is not {kind}", hint=f"unset it for the default, {default:g}") from None
    if not (0 < number < float("inf")) or (whole and not number.is_integer()):
        raise UsageError(
            f"{name}={chosen!r} is not {kind} above 0 (and finite)", hint=f"unset it for the default, {default:g}"
        ) from None
    return number


def _switch(value: str | None, section: Any, key: str, name: str, where: str) -> bool:
    """An on/off setting: the variable `name`, else config.toml's `where` `key`; on unless explicitly off."""
    if value is None and isinstance(section, dict) and key in section:
        if not isinstance(section[key], bool):
            raise UsageError(f"config.toml: {where} {key} must be true or false")
        return section[key]
    text = (value or "on").strip().lower()
    if text in ("on", "1", "true", "yes", ""):
        return True
    if text in ("off", "0", "false", "no"):
        return False
    raise UsageError(f"{name}={value!r} is not on or off", hint=f"{name}=off turns it off")


def _is_local(url: str) -> bool:
    """Whether a database URL points at this machine (the local stack signs with its known secret)."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return host in ("localhost", "::1") or host.startswith("127.")


def _project_dir(env: Mapping[str, str]) -> Path:
    """KIWI_PROJECT_DIR, else the nearest directory from here up that holds .ai/ or kiwi.lock."""
    if env.get("KIWI_PROJECT_DIR"):
        return Path(env["KIWI_PROJECT_DIR"]).expanduser().resolve()
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / ".ai").is_dir() or (folder / LOCKFILE_NAME).is_file():
            return folder
    return here


def _trust(section: Any, policy_override: str | None) -> TrustSettings:
    if not isinstance(section, dict):
        raise UsageError("config.toml: [trust] must be a table", hint="see config.toml's [trust] example")
    policy = policy_override or section.get("policy", "off")
    if policy not in TRUST_POLICIES:
        raise UsageError(f"unknown trust policy {policy!r}", hint="policy is one of: " + ", ".join(TRUST_POLICIES))
    keys = section.get("keys", {})
    if not isinstance(keys, dict) or not all(
        isinstance(v, list) and all(isinstance(k, str) for k in v) for v in keys.values()
    ):
        raise UsageError(
            "config.toml: [trust.keys] maps a namespace to a list of public keys",
            hint='example: public = ["ed25519:MCowBQ..."]',
        )
    return TrustSettings(policy=policy, keys={ns: tuple(v) for ns, v in keys.items()})


def _default_cache(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")) / ".cache")
    return str(Path(base) / "kiwi")


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    import tomllib  # only when there is a config.toml to read

    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: {e}", hint="fix the TOML syntax") from e
