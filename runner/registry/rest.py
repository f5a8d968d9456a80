"""The registry over Supabase's REST API (PostgREST), through supabase-py's async client.

The same SQL functions as the Postgres backend, called as PostgREST RPCs
(`POST /rest/v1/rpc/<function>` with the `p_*` argument names as a JSON object);
`runs` reads the `tool_runs` table (`GET /rest/v1/tool_runs?...`).

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
from typing import Any

import httpx
from postgrest.exceptions import APIError

from supabase import AsyncClient, AsyncClientOptions, AsyncSupabaseException, acreate_client

from ..errors import KiwiError, Refused, RegistryUnavailable, UsageError
from ..principal import requested
from .errors import from_sqlstate

__all__ = ["RestRegistry"]

RUNS_TABLE = "tool_runs"
RUNS_ORDER = "started_at"


def _http2_available() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


class RestRegistry:
    """`Registry` over a Supabase project's REST API. `key` is its anon or service key.

    With `access_token` (a signed-in user's JWT, from Supabase Auth) the key goes only in
    `apikey` and the token in `Authorization: Bearer`, so PostgREST runs every request as
    that user: RLS, their namespaces, publishing where they are members."""

    def __init__(
        self,
        url: str,
        key: str,
        *,
        access_token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._url = url.rstrip("/")
        self._key = key
        self._access_token = access_token
        self._transport = transport
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None
        self._client: AsyncClient | None = None
        self._opening: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"RestRegistry({self._url!r})"

    async def __aenter__(self) -> RestRegistry:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the Registry protocol ---------------------------------------------------------

    async def execution_plan(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        return await self._rpc("resolve_execution_plan", {"p_tool_id": tool_id}, p_version=version)

    async def chain(self, tool_id: str) -> list[dict[str, Any]]:
        return await self._rpc("resolve_executor_chain", {"p_tool_id": tool_id})

    async def chains_batch(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        return await self._rpc("resolve_executor_chains_batch", {"p_tool_ids": list(tool_ids)})

    async def search(
        self, query: str, *, tool_type: str | None = None, category: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        return await self._rpc(
            "search_tools", {"p_query": query, "p_limit": limit}, p_tool_type=tool_type, p_category=category
        )

    async def publish(
        self,
        manifest: dict[str, Any],
        files: list[dict[str, Any]],
        manifest_yaml: str | None = None,
        signature: dict[str, Any] | None = None,
        approval_id: str | None = None,
    ) -> dict[str, Any]:
        return await self._rpc(
            "publish_tool_version",
            {"p_manifest": manifest, "p_files": list(files)},
            p_manifest_yaml=manifest_yaml,
            p_signature=signature,
            p_approval_id=approval_id,
        )

    async def request_publish_approval(
        self, manifest: dict[str, Any], files: list[dict[str, Any]], session: str | None = None
    ) -> dict[str, Any]:
        return await self._rpc(
            "request_publish_approval", {"p_manifest": manifest, "p_files": list(files)}, p_session=session
        )

    async def sign(
        self, tool_id: str, version: str, content_hash: str, public_key: str, signature: str
    ) -> dict[str, Any]:
        return await self._rpc(
            "sign_tool_version",
            {
                "p_tool_id": tool_id,
                "p_version": version,
                "p_content_hash": content_hash,
                "p_public_key": public_key,
                "p_signature": signature,
            },
        )

    async def signature_states(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        return await self._rpc("signature_states", {"p_tool_ids": list(tool_ids)})

    async def attestations(self, tool_id: str, version: str | None = None) -> list[dict[str, Any]]:
        return await self._rpc("resolve_chain_attestations", {"p_tool_id": tool_id}, p_version=version)

    async def preview_plan(self, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._rpc("preview_execution_plan", {"p_manifest": manifest, "p_files": list(files)})

    async def version_source(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        return await self._rpc("tool_version_source", {"p_tool_id": tool_id}, p_version=version)

    async def delete_tool(self, tool_id: str) -> dict[str, Any]:
        return await self._rpc("delete_tool", {"p_tool_id": tool_id})

    async def yank(self, tool_id: str, version: str, reason: str | None = None) -> dict[str, Any]:
        return await self._rpc("yank_tool_version", {"p_tool_id": tool_id, "p_version": version}, p_reason=reason)

    async def record_run(self, record: dict[str, Any]) -> str:
        return str(await self._rpc("record_run", {"p_run": record}))

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        return [str(i) for i in await self._rpc("record_runs", {"p_runs": list(records)}) or []]

    async def record_audit(self, entry: dict[str, Any]) -> str:
        return str(await self._rpc("record_audit", {"p_entry": entry}))

    async def whoami(self) -> dict[str, Any]:
        return await self._rpc("whoami", {})

    async def record_audits(self, entries: list[dict[str, Any]]) -> list[str]:
        return [str(i) for i in await self._rpc("record_audits", {"p_entries": list(entries)}) or []]

    async def check_call(self, call: dict[str, Any]) -> dict[str, Any]:
        return await self._rpc("check_call", {"p": call})

    async def take_rate_limit(self, tool_id: str, server: str | None, session: str | None) -> dict[str, Any]:
        return await self._rpc("take_rate_limit", {"p_tool_id": tool_id, "p_server": server, "p_session": session})

    async def open_context(
        self,
        session: str,
        directive: str | None = None,
        parent: str | None = None,
        permissions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return await self._rpc(
            "open_context", {"p_session": session}, p_directive=directive, p_parent=parent, p_permissions=permissions
        )

    async def get_context(self, context_id: str) -> dict[str, Any]:
        return await self._rpc("get_context", {"p_id": context_id})

    async def decide_approval(
        self, approval_id: str, approve: bool, reason: str | None = None, decider_session: str | None = None
    ) -> dict[str, Any]:
        return await self._rpc(
            "decide_approval",
            {"p_id": approval_id, "p_approve": approve},
            p_reason=reason,
            p_decider_session=decider_session,
        )

    async def approvals(self) -> list[dict[str, Any]]:
        client = await self._connect()
        return await self._execute(client.table("pending_approvals").select("*").order("requested_at"))

    async def runs(self, *, tool_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        client = await self._connect()
        query = client.table(RUNS_TABLE).select("*")
        if tool_id is not None:
            query = query.eq("tool_id", tool_id)
        query = query.order(RUNS_ORDER, desc=True).limit(limit)
        return await self._execute(query)

    async def aclose(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.aclose()

    # -- plumbing ----------------------------------------------------------------------

    async def _rpc(self, function: str, params: dict[str, Any], **optional: Any) -> Any:
        """Call a function; optional arguments left as None are not sent, so their SQL defaults apply."""
        params = {**params, **{k: v for k, v in optional.items() if v is not None}}
        asked = requested()
        if asked is not None and asked.token != self._access_token:
            # never answer one caller's request with another's credentials
            raise Refused(
                f"the REST backend acts only as the token it was configured with, not as {asked.describe()}",
                hint="serve several callers over the Postgres backend (KIWI_DATABASE_URL)",
            )
        client = await self._connect()
        return await self._execute(client.rpc(function, params))

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
                if self._access_token:  # supabase-py keeps an Authorization it is given instead of the key's
                    options.headers["Authorization"] = f"Bearer {self._access_token}"
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
