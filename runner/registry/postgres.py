"""The registry over a direct Postgres connection (psycopg 3 and a connection pool).

Each method is one statement calling one SQL function. Connections are autocommit and
prepare every statement on first use (`prepare_threshold=0`), so the runner's hot call,
`select public.resolve_execution_plan(%s, %s)`, is a Bind/Execute/Sync of an already
prepared statement: one round trip.

Every statement runs as the request's principal (runner/principal.py): its role (`anon`,
`authenticated`, `service_role`) and `request.jwt.claims`, set on the connection with
`set_config` as PostgREST sets them, so that RLS and the namespace rules decide; the
database login only lends the connection. A connection remembers whom it was set up
for, so a process that acts for one principal (the CLI, an MCP server over stdio) pays
that once per connection; a connection handed to another principal is switched first.

The pool opens on first use. Its first connection is awaited, and a failure to connect
(refused, wrong password, unknown database) is reported at once as RegistryUnavailable,
with the server's reason and the URL with its password redacted, instead of after the
pool's timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from functools import partial
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import KiwiError, Refused, RegistryUnavailable, UsageError
from ..principal import Principal, current
from .errors import from_sqlstate, redact, scrub
from .plan_cache import PlanCache

__all__ = ["PostgresRegistry"]

ACT_AS_SQL = "select set_config('role', %s, false), set_config('request.jwt.claims', %s, false)"
PLAN_SQL = "select public.resolve_execution_plan(%s, %s)"
CHAIN_SQL = "select * from public.resolve_executor_chain(%s)"
BATCH_SQL = "select * from public.resolve_executor_chains_batch(%s::text[])"
SEARCH_SQL = "select * from public.search_tools(%s, %s, %s, %s::int)"
PUBLISH_SQL = "select public.publish_tool_version(%s::jsonb, %s::jsonb, %s, %s::jsonb)"
PUBLISH_APPROVED_SQL = "select public.publish_tool_version(%s::jsonb, %s::jsonb, %s, %s::jsonb, %s::uuid)"
REQUEST_PUBLISH_APPROVAL_SQL = "select public.request_publish_approval(%s::jsonb, %s::jsonb, %s)"
SIGN_SQL = "select public.sign_tool_version(%s, %s, %s, %s, %s)"
SIGNATURE_STATES_SQL = "select * from public.signature_states(%s::text[])"
ATTESTATIONS_SQL = "select * from public.resolve_chain_attestations(%s, %s)"
PREVIEW_PLAN_SQL = "select public.preview_execution_plan(%s::jsonb, %s::jsonb)"
VERSION_SOURCE_SQL = "select public.tool_version_source(%s, %s)"
RECORD_RUN_SQL = "select public.record_run(%s::jsonb)"
RECORD_RUNS_SQL = (
    "select coalesce(array_agg(r.id::text order by r.n), '{}')"
    " from public.record_runs(%s::jsonb) with ordinality as r(id, n)"
)
RECORD_AUDIT_SQL = "select public.record_audit(%s::jsonb)"
RECORD_AUDITS_SQL = (
    "select coalesce(array_agg(r.id::text order by r.n), '{}')"
    " from public.record_audits(%s::jsonb) with ordinality as r(id, n)"
)
CHECK_CALL_SQL = "select public.check_call(%s::jsonb)"
TAKE_RATE_LIMIT_SQL = "select public.take_rate_limit(%s, %s, %s)"
OPEN_CONTEXT_SQL = "select public.open_context(%s, %s, %s::uuid, %s::jsonb)"
GET_CONTEXT_SQL = "select public.get_context(%s::uuid)"
APPROVAL_REQUIRED_SQL = "select public.approval_required(%s)"
REQUEST_APPROVAL_SQL = "select public.request_approval(%s::jsonb)"
DECIDE_APPROVAL_SQL = "select public.decide_approval(%s::uuid, %s, %s, %s)"
USE_APPROVAL_SQL = "select public.use_approval(%s::uuid, %s, %s, %s)"
APPROVALS_SQL = (
    "select coalesce(jsonb_agg(to_jsonb(p) order by p.requested_at, p.id), '[]') from public.pending_approvals p"
)
# Rows as JSON, so that they have the shapes the REST backend returns (timestamps and
# ids as strings). Newest first.
RUNS_SQL = """
select coalesce(jsonb_agg(to_jsonb(r) order by r.started_at desc), '[]'::jsonb)
  from (select * from public.tool_runs
         where %(tool_id)s::text is null or tool_id = %(tool_id)s::text
         order by started_at desc
         limit %(limit)s::int) r
"""


POOL_NAME = "kiwi-registry"


class _QuietConnectFailures(logging.Filter):
    """Drops the pool's own log line for a failed connection of this pool: the caller gets
    it as RegistryUnavailable, so logging it as well would print it twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith(f"error connecting in {POOL_NAME!r}"))


logging.getLogger("psycopg.pool").addFilter(_QuietConnectFailures())


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)


def _untouched(verdict: dict[str, Any]) -> bool:
    """A verdict that allowed a call without counting it or using an approval."""
    return verdict.get("allowed") is True and not verdict.get("limits") and verdict.get("approval") is None


def _uuid(value: str) -> str:
    """An approval id, checked here so that a typo is a usage error naming it, not a cast error."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise UsageError(
            f"not an approval id: {value!r}", hint="approval ids are uuids; list them with `kiwi approvals`"
        ) from None


class PostgresRegistry:
    """`Registry` over Postgres. `url` is a libpq URL or conninfo string; `principal` is whom
    it acts as outside any `acting_as` (there is no default: choosing admin is explicit)."""

    def __init__(
        self,
        url: str,
        *,
        principal: Principal,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 5.0,
        timeout: float = 30.0,
        cache_plans: bool = True,
    ) -> None:
        self._url = url
        self.principal = principal
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._timeout = timeout
        self._pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Lock | None = None
        self._last_connect_error: BaseException | None = None
        self._plan_cache = PlanCache(url, connect_timeout) if cache_plans else None

    def __repr__(self) -> str:
        return f"PostgresRegistry({redact(self._url)!r})"

    async def __aenter__(self) -> PostgresRegistry:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the Registry protocol ---------------------------------------------------------

    async def execution_plan(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        """The plan, from memory while the database's change notifications say it is current
        (see plan_cache.py; treat it as read-only), else one prepared round trip."""
        if self._plan_cache is None:
            return await self._value(PLAN_SQL, (tool_id, version))
        key = (current(self.principal).claims_json, tool_id, version)  # what one caller sees, another may not
        return await self._plan_cache.get(key, lambda: self._value(PLAN_SQL, (tool_id, version)))

    async def chain(self, tool_id: str) -> list[dict[str, Any]]:
        return await self._rows(CHAIN_SQL, (tool_id,))

    async def chains_batch(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        return await self._rows(BATCH_SQL, (list(tool_ids),))

    async def search(
        self, query: str, *, tool_type: str | None = None, category: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        return await self._rows(SEARCH_SQL, (query, tool_type, category, limit))

    async def publish(
        self,
        manifest: dict[str, Any],
        files: list[dict[str, Any]],
        manifest_yaml: str | None = None,
        signature: dict[str, Any] | None = None,
        approval_id: str | None = None,
    ) -> dict[str, Any]:
        sig = None if signature is None else Jsonb(signature, _dumps)
        args = (Jsonb(manifest, _dumps), Jsonb(list(files), _dumps), manifest_yaml, sig)
        if approval_id is None:
            return await self._value(PUBLISH_SQL, args)
        return await self._value(PUBLISH_APPROVED_SQL, (*args, _uuid(approval_id)))

    async def request_publish_approval(
        self, manifest: dict[str, Any], files: list[dict[str, Any]], session: str | None = None
    ) -> dict[str, Any]:
        return await self._value(
            REQUEST_PUBLISH_APPROVAL_SQL, (Jsonb(manifest, _dumps), Jsonb(list(files), _dumps), session)
        )

    async def sign(
        self, tool_id: str, version: str, content_hash: str, public_key: str, signature: str
    ) -> dict[str, Any]:
        return await self._value(SIGN_SQL, (tool_id, version, content_hash, public_key, signature))

    async def signature_states(self, tool_ids: list[str]) -> list[dict[str, Any]]:
        return await self._rows(SIGNATURE_STATES_SQL, (list(tool_ids),))

    async def attestations(self, tool_id: str, version: str | None = None) -> list[dict[str, Any]]:
        return await self._rows(ATTESTATIONS_SQL, (tool_id, version))

    async def preview_plan(self, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._value(PREVIEW_PLAN_SQL, (Jsonb(manifest, _dumps), Jsonb(list(files), _dumps)))

    async def version_source(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        return await self._value(VERSION_SOURCE_SQL, (tool_id, version))

    async def delete_tool(self, tool_id: str) -> dict[str, Any]:
        return await self._value("select public.delete_tool(%s)", (tool_id,))

    async def yank(self, tool_id: str, version: str, reason: str | None = None) -> dict[str, Any]:
        return await self._value("select public.yank_tool_version(%s, %s, %s)", (tool_id, version, reason))

    async def record_run(self, record: dict[str, Any]) -> str:
        return str(await self._value(RECORD_RUN_SQL, (Jsonb(record, _dumps),)))

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        return list(await self._value(RECORD_RUNS_SQL, (Jsonb(list(records), _dumps),)) or [])

    async def runs(self, *, tool_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        return await self._value(RUNS_SQL, {"tool_id": tool_id, "limit": limit})

    async def record_audit(self, entry: dict[str, Any]) -> str:
        return str(await self._value(RECORD_AUDIT_SQL, (Jsonb(entry, _dumps),)))

    async def whoami(self) -> dict[str, Any]:
        return await self._value("select public.whoami()", ())

    async def record_audits(self, entries: list[dict[str, Any]]) -> list[str]:
        return list(await self._value(RECORD_AUDITS_SQL, (Jsonb(list(entries), _dumps),)) or [])

    async def check_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """The gate's verdict. A call no limit counts and no policy covers is let through from
        memory while the plan cache listens: it stays so until a limit, a policy or a plan
        changes, and each of those notifies (20261121003000_gate_notifications.sql). Anything
        else, every dry run and every call that brings an approval asks the database."""
        fetch = partial(self._value, CHECK_CALL_SQL, (Jsonb(call, _dumps),))
        if self._plan_cache is None or call.get("approval_id") is not None or call.get("dry_run"):
            return await fetch()  # a dry run is let through even where a policy would hold the run
        who = current(self.principal).claims_json
        key = ("gate", who, call.get("tool_id"), call.get("server"), call.get("session_id"))
        return await self._plan_cache.get(key, fetch, keep=_untouched)

    async def take_rate_limit(self, tool_id: str, server: str | None, session: str | None) -> dict[str, Any]:
        return await self._value(TAKE_RATE_LIMIT_SQL, (tool_id, server, session))

    async def open_context(
        self,
        session: str,
        directive: str | None = None,
        parent: str | None = None,
        permissions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        narrowed = Jsonb(permissions, _dumps) if permissions is not None else None
        return await self._value(OPEN_CONTEXT_SQL, (session, directive, parent, narrowed))

    async def get_context(self, context_id: str) -> dict[str, Any]:
        return await self._value(GET_CONTEXT_SQL, (context_id,))

    async def approval_required(self, tool_id: str) -> dict[str, Any]:
        return await self._value(APPROVAL_REQUIRED_SQL, (tool_id,))

    async def request_approval(self, request: dict[str, Any]) -> dict[str, Any]:
        return await self._value(REQUEST_APPROVAL_SQL, (Jsonb(request, _dumps),))

    async def decide_approval(
        self, approval_id: str, approve: bool, reason: str | None = None, decider_session: str | None = None
    ) -> dict[str, Any]:
        return await self._value(DECIDE_APPROVAL_SQL, (_uuid(approval_id), approve, reason, decider_session))

    async def use_approval(
        self, approval_id: str, tool_id: str, params_sha256: str, content_hash: str | None = None
    ) -> dict[str, Any]:
        return await self._value(USE_APPROVAL_SQL, (_uuid(approval_id), tool_id, params_sha256, content_hash))

    async def approvals(self) -> list[dict[str, Any]]:
        return list(await self._value(APPROVALS_SQL, ()) or [])

    async def aclose(self) -> None:
        if self._plan_cache is not None:
            await self._plan_cache.aclose()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- plumbing ----------------------------------------------------------------------

    async def _value(self, query: str, params: Any) -> Any:
        pool = self._pool or await self._open_pool()
        try:
            async with pool.connection() as conn:
                await self._act_as(conn)
                cur = await conn.execute(query, params)
                row = await cur.fetchone()
        except PoolTimeout as exc:
            raise self._unavailable(self._last_connect_error or exc) from exc
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        return row[0] if row else None

    async def _rows(self, query: str, params: Any) -> list[dict[str, Any]]:
        pool = self._pool or await self._open_pool()
        try:
            async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                await self._act_as(conn)
                await cur.execute(query, params)
                return await cur.fetchall()
        except PoolTimeout as exc:
            raise self._unavailable(self._last_connect_error or exc) from exc
        except psycopg.Error as exc:
            raise self._error(exc) from exc

    async def _act_as(self, conn: Any) -> None:
        """Set the connection up for the request's principal, unless it already is."""
        who = current(self.principal)
        key = who.claims_json
        if conn.kiwi_as == key:
            return
        conn.kiwi_as = None  # unknown until the statement has succeeded
        try:
            await conn.execute(ACT_AS_SQL, (who.role, key))
        except psycopg.errors.InsufficientPrivilege as exc:
            raise Refused(
                f"the database login cannot act as role {who.role}: {exc.diag.message_primary}",
                hint=f"grant {who.role} to the login of KIWI_DATABASE_URL, as Supabase grants it to postgres",
            ) from exc
        conn.kiwi_as = key

    async def _open_pool(self) -> AsyncConnectionPool:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._new_pool()
        return self._pool

    async def _new_pool(self) -> AsyncConnectionPool:
        failed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        registry = self

        class _Connection(psycopg.AsyncConnection):
            """Tells the registry why a connection attempt failed (the pool only retries), and
            remembers whom it was last set up to act as (`kiwi_as`: the claims, or None)."""

            kiwi_as: str | None = None

            @classmethod
            async def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:  # type: ignore[override]
                try:
                    conn = await super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    registry._last_connect_error = exc
                    if not failed.done():
                        failed.set_result(exc)
                    raise
                registry._last_connect_error = None
                return conn

        pool = AsyncConnectionPool(
            self._url,
            connection_class=_Connection,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 0,
                "connect_timeout": max(1, round(self._connect_timeout)),
            },
            min_size=self._min_size,
            max_size=self._max_size,
            timeout=self._timeout,
            name=POOL_NAME,
            open=False,
        )
        opened = asyncio.ensure_future(pool.open(wait=True, timeout=self._connect_timeout))
        await asyncio.wait({opened, failed}, return_when=asyncio.FIRST_COMPLETED)
        if opened.done() and not opened.cancelled() and opened.exception() is None:
            return pool
        opened.cancel()
        reason: BaseException = failed.result() if failed.done() else opened.exception() or TimeoutError()
        await pool.close(timeout=1.0)
        raise self._unavailable(reason)

    def _unavailable(self, exc: BaseException) -> RegistryUnavailable:
        reason = scrub(str(exc).strip() or type(exc).__name__, self._url)
        return RegistryUnavailable(
            f"cannot connect to the registry database at {redact(self._url)}: {reason}",
            hint="start the local database with `make db`, or check KIWI_DATABASE_URL",
        )

    def _error(self, exc: psycopg.Error) -> KiwiError:
        diag = exc.diag
        if exc.sqlstate is None and isinstance(exc, psycopg.DataError | psycopg.ProgrammingError):
            # raised by psycopg itself, before sending: a value Postgres cannot take (a NUL byte)
            return UsageError(scrub(str(exc), self._url), hint="remove the NUL characters from the input")
        if exc.sqlstate is None or (isinstance(exc, psycopg.OperationalError) and exc.sqlstate.startswith("08")):
            return self._unavailable(exc)
        message = scrub(diag.message_primary or str(exc), self._url)
        return from_sqlstate(exc.sqlstate, message, detail=diag.message_detail, hint=diag.message_hint)
