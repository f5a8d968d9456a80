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

A database restart (or a killed backend) leaves the pool holding dead connections. A
statement that meets one is retried ONCE, on a new pool (every connection of the old one
is likely dead too: retrying on the pool's next idle one is how a restarted server used
to fail eight calls in a row); a registry still down fails that reopening at once, as
RegistryUnavailable. psycopg_pool discards a connection returned to it closed or broken,
so a dead one never goes back into use; the old pool is closed behind the new one.
The retry must never run a statement twice, so the rule is:

* retried always, when the statement cannot have run: the connection was found dead
  before it was sent (an idle connection has nothing to read unless the server is
  closing it, so one that does is closed instead of used; the pool was closed under us;
  the per-principal setup failed first), or the server answered it with 57P01/57P03 (a
  terminated backend aborts its transaction; PostgreSQL holds termination off during a
  commit, and a committed statement's reply is complete before any termination notice);
* retried only if it is a read, when the connection was lost mid-statement without a
  word (an immediate shutdown, a crash, 57P02, class 08, a network cut): an autocommit
  write may have committed just before, so it is not repeated and the caller gets
  RegistryUnavailable. The run recorder, whose records carry their own ids, retries
  those itself and counts a duplicate id as written (runner/harness/recorder.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import select
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

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
DECIDE_APPROVAL_SQL = "select public.decide_approval(%s::uuid, %s, %s, %s)"
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
# The server's answers that say it ended the session before the statement committed
# (admin_shutdown, cannot_connect_now): the statement did not run, so it may run again.
NOT_RUN = frozenset({"57P01", "57P03"})
T = TypeVar("T")


class _QuietConnectFailures(logging.Filter):
    """Drops the pool's own log lines for a failed connection of this pool and for a dead
    connection it discards: the caller gets the first as RegistryUnavailable, and the
    registry has already dealt with the second (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not message.startswith((f"error connecting in {POOL_NAME!r}", "discarding closed connection"))


class _Died(Exception):
    """The statement's connection died; `may_have_run` says whether the statement may
    have run all the same (then only a read is retried)."""

    def __init__(self, cause: BaseException, *, may_have_run: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.may_have_run = may_have_run


def _hung_up(conn: Any) -> bool:
    """True when an idle pooled connection is closed or has something to read: a server
    says nothing to an idle connection it does not LISTEN on, except that it is ending
    it (a termination message, then end of file). One poll, no round trip."""
    if conn.closed:
        return True
    try:
        fd = conn.pgconn.socket
    except psycopg.OperationalError:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


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
        self._retiring: set[asyncio.Task[None]] = set()  # old pools closing after a reconnect
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
            return await self._value(PLAN_SQL, (tool_id, version), read=True)
        key = (current(self.principal).claims_json, tool_id, version)  # what one caller sees, another may not
        return await self._plan_cache.get(key, lambda: self._value(PLAN_SQL, (tool_id, version), read=True))

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
        return await self._value(PREVIEW_PLAN_SQL, (Jsonb(manifest, _dumps), Jsonb(list(files), _dumps)), read=True)

    async def version_source(self, tool_id: str, version: str | None = None) -> dict[str, Any]:
        return await self._value(VERSION_SOURCE_SQL, (tool_id, version), read=True)

    async def delete_tool(self, tool_id: str) -> dict[str, Any]:
        return await self._value("select public.delete_tool(%s)", (tool_id,))

    async def yank(self, tool_id: str, version: str, reason: str | None = None) -> dict[str, Any]:
        return await self._value("select public.yank_tool_version(%s, %s, %s)", (tool_id, version, reason))

    async def record_run(self, record: dict[str, Any]) -> str:
        return str(await self._value(RECORD_RUN_SQL, (Jsonb(record, _dumps),)))

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        return list(await self._value(RECORD_RUNS_SQL, (Jsonb(list(records), _dumps),)) or [])

    async def runs(self, *, tool_id: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        return await self._value(RUNS_SQL, {"tool_id": tool_id, "limit": limit}, read=True)

    async def record_audit(self, entry: dict[str, Any]) -> str:
        return str(await self._value(RECORD_AUDIT_SQL, (Jsonb(entry, _dumps),)))

    async def whoami(self) -> dict[str, Any]:
        return await self._value("select public.whoami()", (), read=True)

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
        return await self._value(GET_CONTEXT_SQL, (context_id,), read=True)

    async def decide_approval(
        self, approval_id: str, approve: bool, reason: str | None = None, decider_session: str | None = None
    ) -> dict[str, Any]:
        return await self._value(DECIDE_APPROVAL_SQL, (_uuid(approval_id), approve, reason, decider_session))

    async def approvals(self) -> list[dict[str, Any]]:
        return list(await self._value(APPROVALS_SQL, (), read=True) or [])

    async def aclose(self) -> None:
        if self._plan_cache is not None:
            await self._plan_cache.aclose()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    # -- plumbing ----------------------------------------------------------------------

    async def _value(self, query: str, params: Any, *, read: bool = False) -> Any:
        """The first column of the first row. `read`: the statement changes nothing, so it may
        be repeated after a connection lost mid-statement (see the module docstring)."""

        async def work(conn: Any) -> Any:
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
            return row[0] if row else None

        return await self._run(work, read=read)

    async def _rows(self, query: str, params: Any) -> list[dict[str, Any]]:
        """Every row, as dicts; only reads are asked for rows."""

        async def work(conn: Any) -> list[dict[str, Any]]:
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(query, params)
                return await cur.fetchall()

        return await self._run(work, read=True)

    async def _run(self, work: Callable[[Any], Awaitable[T]], *, read: bool) -> T:
        """`work` on a pooled connection set up for the principal; once more on a new pool
        when the connection was dead and the rule of the module docstring allows it."""
        pool = self._pool or await self._open_pool()
        for attempt in range(2):
            try:
                return await self._attempt(pool, work)
            except PoolTimeout as exc:
                raise self._unavailable(self._last_connect_error or exc) from exc
            except psycopg.Error as exc:
                raise self._error(exc) from exc
            except _Died as died:
                if attempt or (died.may_have_run and not read):
                    raise self._dead(died.cause) from died.cause
            pool = await self._reopen(pool)
        raise AssertionError("unreachable")

    async def _attempt(self, pool: AsyncConnectionPool, work: Callable[[Any], Awaitable[T]]) -> T:
        """One try; a dead connection is raised as _Died, saying whether the statement may have run."""
        try:
            async with pool.connection() as conn:
                if _hung_up(conn):
                    await conn.close()  # the pool discards a closed connection
                    raise _Died(psycopg.OperationalError("the server closed the connection"), may_have_run=False)
                try:
                    await self._act_as(conn)
                except psycopg.Error as exc:
                    if conn.closed:  # only the setup was sent
                        raise _Died(exc, may_have_run=False) from exc
                    raise
                try:
                    return await work(conn)
                except psycopg.Error as exc:
                    if conn.closed:
                        raise _Died(exc, may_have_run=exc.sqlstate not in NOT_RUN) from exc
                    raise
        except PoolClosed as exc:  # replaced by a concurrent reconnect: nothing was sent
            raise _Died(exc, may_have_run=False) from exc

    async def _reopen(self, dead: AsyncConnectionPool) -> AsyncConnectionPool:
        """A new pool in place of one whose connection died (unless a concurrent call has
        already replaced it). The old one is closed behind: connections in use close when
        returned. Raises RegistryUnavailable, at once, while the database is down."""
        async with self._lock():
            if self._pool is dead:
                self._pool = None
                task = asyncio.get_running_loop().create_task(dead.close(timeout=1.0))
                self._retiring.add(task)
                task.add_done_callback(self._retiring.discard)
            if self._pool is None:
                self._pool = await self._new_pool()
            return self._pool

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

    def _lock(self) -> asyncio.Lock:
        if self._opening is None:
            self._opening = asyncio.Lock()
        return self._opening

    async def _open_pool(self) -> AsyncConnectionPool:
        async with self._lock():
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

    def _dead(self, cause: BaseException) -> KiwiError:
        return self._error(cause) if isinstance(cause, psycopg.Error) else self._unavailable(cause)

    def _error(self, exc: psycopg.Error) -> KiwiError:
        diag = exc.diag
        if exc.sqlstate is None and isinstance(exc, psycopg.DataError | psycopg.ProgrammingError):
            # raised by psycopg itself, before sending: a value Postgres cannot take (a NUL byte)
            return UsageError(scrub(str(exc), self._url), hint="remove the NUL characters from the input")
        if exc.sqlstate is None or (isinstance(exc, psycopg.OperationalError) and exc.sqlstate.startswith("08")):
            return self._unavailable(exc)
        message = scrub(diag.message_primary or str(exc), self._url)
        return from_sqlstate(exc.sqlstate, message, detail=diag.message_detail, hint=diag.message_hint)
