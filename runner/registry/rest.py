"""The registry over Supabase's REST API (PostgREST), through supabase-py's async client.

`RestBackend.call` is the registry's one seam (base.py) over REST: the same SQL functions
as the Postgres backend, called as PostgREST RPCs (`POST /rest/v1/rpc/<function>` with
the `p_*` argument names as a JSON object); a `Select` reads a table or view
(`GET /rest/v1/tool_runs?...`). `RestRegistry` is the typed Registry over it.

Transport seam: supabase-py 2.x takes an `httpx.AsyncClient` in
`AsyncClientOptions(httpx_client=...)` and hands it to its PostgREST client (and to
auth, storage and functions). This backend builds that client itself, with the
`transport` it was given, so tests inject an `httpx.MockTransport` (or any
`httpx.AsyncBaseTransport`) and see every request exactly as PostgREST would.
PostgREST's retries of GET requests are turned off: an unreachable API is reported
at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import httpx
from postgrest.exceptions import APIError

from supabase import AsyncClient, AsyncClientOptions, AsyncSupabaseException, acreate_client

from ..errors import KiwiError, Refused, RegistryUnavailable, UsageError
from ..principal import requested
from ..supabase_auth.grants import REFRESH_MARGIN_S
from ..supabase_auth.renewal import Renew, expiry_of
from .base import Registry, Returns, Select
from .errors import from_sqlstate

__all__ = ["RestBackend", "RestRegistry"]


def _http2_available() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


class RestBackend:
    """The registry's calls over a Supabase project's REST API. `key` is its anon or service key.

    With `access_token` (a signed-in user's JWT, from Supabase Auth) the key goes only in
    `apikey` and the token in `Authorization: Bearer`, so PostgREST runs every request as
    that user: RLS, their namespaces, publishing where they are members. With `renew` (the
    token came from the session `kiwi login` keeps: supabase_auth/renewal.py) a fresh token
    of the same session is sent from shortly before the first one expires."""

    cache = None  # PostgREST sends no change notifications: every call asks

    def __init__(
        self,
        url: str,
        key: str,
        *,
        access_token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        renew: Renew | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self._key = key
        self._access_token = access_token  # whom this backend acts as (the caller it serves)
        self._sent = access_token  # the token it sends for them: renewed when `renew` is given
        self._renew = renew if access_token else None
        self._expires_at = expiry_of(access_token) if self._renew and access_token else 0.0
        self._renewing: asyncio.Lock | None = None
        self._transport = transport
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None
        self._client: AsyncClient | None = None
        self._opening: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"RestBackend({self._url!r})"

    def caller(self) -> str:
        return "token"  # one only: a call for anyone else is refused (below)

    async def call(
        self, function: str, args: Mapping[str, Any], *, returns: Returns = "value", read: bool = False
    ) -> Any:
        """An RPC, or for a `Select` a GET of the table or view (`read` changes nothing here:
        PostgREST's own retries are off, so nothing is repeated)."""
        asked = requested()
        if asked is not None and asked.token != self._access_token:
            # never answer one caller's request with another's credentials
            raise Refused(
                f"the REST backend acts only as the token it was configured with, not as {asked.describe()}",
                hint="serve several callers over the Postgres backend (KIWI_DATABASE_URL)",
            )
        if self._renew is not None and time.time() >= self._expires_at - REFRESH_MARGIN_S:
            await self._renewed()
        client = await self._connect()
        if not isinstance(returns, Select):
            return await self._execute(client.rpc(function, dict(args)))
        query = client.table(function).select(",".join(returns.columns) or "*")
        for column, value in args.items():
            query = query.eq(column, value)
        for column in returns.order:
            query = query.order(column, desc=returns.desc)
        if returns.limit is not None:
            query = query.limit(returns.limit)
        return await self._execute(query)

    async def aclose(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.aclose()

    # -- plumbing ----------------------------------------------------------------------

    async def _renewed(self) -> None:
        """Send a fresh token of the same session from now on (one renewal for concurrent calls)."""
        assert self._renew is not None
        if self._renewing is None:
            self._renewing = asyncio.Lock()
        async with self._renewing:
            if time.time() < self._expires_at - REFRESH_MARGIN_S:
                return  # another call renewed it meanwhile
            token, self._expires_at = await asyncio.to_thread(self._renew)  # a file lock and an HTTP call
            self._sent = token
            if self._client is not None:
                self._client.postgrest.auth(token)

    async def _execute(self, request: Any) -> Any:
        try:
            response = await request.execute()
        except APIError as exc:
            raise self._error(exc) from exc
        except httpx.HTTPError as exc:
            raise RegistryUnavailable(
                f"cannot reach the Supabase API at {self._url}: {exc or type(exc).__name__}",
                hint="check SUPABASE_URL and your network",
            ) from exc
        return response.data

    async def _connect(self) -> AsyncClient:
        if self._client is not None:
            return self._client
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._client is None:
                if self._transport is not None:
                    http = httpx.AsyncClient(transport=self._transport, timeout=self._timeout)
                else:
                    # never follow a redirect: it would carry the apikey (and a user's token) elsewhere
                    http = httpx.AsyncClient(timeout=self._timeout, http2=_http2_available(), follow_redirects=False)
                options = AsyncClientOptions(
                    httpx_client=http,
                    postgrest_client_retry=False,
                    auto_refresh_token=False,
                    persist_session=False,
                )
                if self._sent:  # supabase-py keeps an Authorization it is given instead of the key's
                    options.headers["Authorization"] = f"Bearer {self._sent}"
                try:
                    client = await acreate_client(self._url, self._key, options)
                except AsyncSupabaseException as exc:
                    await http.aclose()
                    raise UsageError(
                        f"cannot use the Supabase URL {self._url!r}: {exc.message}",
                        hint="SUPABASE_URL is the project's URL, such as https://<project>.supabase.co",
                    ) from exc
                self._http, self._client = http, client
        return self._client

    def _error(self, exc: APIError) -> KiwiError:
        code = exc.code or ""
        message = exc.message or "the Supabase API refused the request"
        if not code or (len(code) == 3 and code.isdigit()):
            # Not PostgREST's JSON: a gateway or proxy answered (an unknown key, a wrong
            # URL, a project that is paused or down).
            status = int(code) if code else 0
            return RegistryUnavailable(
                f"the Supabase API at {self._url} answered {status or 'an error'}: {message}",
                hint="check SUPABASE_URL, the key (SUPABASE_KEY) and KIWI_ACCESS_TOKEN if set (a JWT expires)",
            )
        return from_sqlstate(code, message, detail=exc.details, hint=exc.hint)


class RestRegistry(Registry):
    """The typed `Registry` over a `RestBackend`, made from the same arguments. With
    `access_token` (a signed-in user's JWT) every request runs as that user."""

    backend: RestBackend

    def __init__(
        self,
        url: str,
        key: str,
        *,
        access_token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        renew: Renew | None = None,
    ) -> None:
        backend = RestBackend(url, key, access_token=access_token, transport=transport, timeout=timeout, renew=renew)
        super().__init__(backend)

    def __repr__(self) -> str:
        return f"RestRegistry({self.backend._url!r})"
