"""The registry over a direct Postgres connection (psycopg 3 and a connection pool).

`PostgresBackend.call` is the registry's one seam (base.py) over Postgres: a call is one
statement, `select public.<function>(p_x => %s, ...)`, its arguments named as the
function declares them (JSON ones sent as jsonb). Connections are autocommit and prepare
every statement on first use (`prepare_threshold=0`), so the runner's hot call,
`select public.resolve_execution_plan(p_tool_id => %s)`, is a Bind/Execute/Sync of an
already prepared statement: one round trip. `PostgresRegistry` is the typed Registry over
it, with the plan cache (plan_cache.py) that its LISTEN connection keeps current.

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

With `max_size=1` (a one-shot command: `kiwi run`, `show`, `search`) there is no pool: one
connection, taken in turn (_OneConnection: the three calls of the pool this module makes),
and psycopg_pool is never imported. What follows holds for it as for a pool.

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
import contextlib
import json
import logging
import re
import select
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..errors import KiwiError, Refused, RegistryUnavailable, UsageError
from ..principal import Principal, current
from .base import Registry, Returns, Rows, Select
from .errors import from_sqlstate, redact, scrub
from .plan_cache import PlanCache

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresBackend", "PostgresRegistry"]

ACT_AS_SQL = "select set_config('role', %s, false), set_config('request.jwt.claims', %s, false)"
# Sent as jsonb: every dict, and the lists these arguments hold (files, run records, audit
# entries, embeddings to store); a list of floats is a real[] (a query's embedding), any other
# list a text[] (tests/registry/test_signatures.py holds this to pg_proc).
JSON_LISTS = frozenset({"p_files", "p_runs", "p_entries", "p_items", "p_audits"})
_NAME = re.compile(r"[a-z_][a-z0-9_]*")

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


class _KiwiConnection(psycopg.AsyncConnection):
    """A registry connection: remembers whom it was last set up to act as (`kiwi_as`: the claims, or None)."""

    kiwi_as: str | None = None


class _SourceClosed(Exception):
    """The one connection was closed under a call waiting for it (a reconnect replaced it): nothing was sent."""


class _OneConnection:
    """A pool of one connection, for a one-shot command (`max_size=1`): `open`, `connection` and
    `close` as AsyncConnectionPool's, without importing psycopg_pool. Calls take turns; a
    connection found closed when its turn ends is dropped, and the next turn connects anew."""

    def __init__(self, url: str, kwargs: dict[str, Any]) -> None:
        self._url = url
        self._kwargs = kwargs
        self._conn: _KiwiConnection | None = None
        self._turn = asyncio.Lock()
        self._closed = False

    async def open(self) -> None:
        self._conn = await _KiwiConnection.connect(self._url, **self._kwargs)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[_KiwiConnection]:
        async with self._turn:
            if self._closed:
                raise _SourceClosed("the registry's connection was closed")
            if self._conn is None or self._conn.closed:
                self._conn = None
                self._conn = await _KiwiConnection.connect(self._url, **self._kwargs)
            try:
                yield self._conn
            finally:
                if self._closed:  # closed while in use: closed now that it is returned, as a pool does
                    await self._drop()

    async def close(self, timeout: float = 5.0) -> None:
        """Close the connection now, or when the call using it returns it (`timeout`: the pool's, unused)."""
        self._closed = True
        if not self._turn.locked():
            await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()


logging.getLogger("psycopg.pool").addFilter(_QuietConnectFailures())


_JSON = json.JSONEncoder(default=str)  # one for every argument: json.dumps with options builds one per call


def _dumps(value: Any) -> str:
    if isinstance(value, Rows) and value.json is not None:  # encoded already (the run journal's)
        return value.json
    return _JSON.encode(value)


def _name(name: str) -> str:
    """A function, table, column or argument name, as it may stand in a statement unquoted."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a registry name: {name!r}")
    return name


def _bind(name: str, value: Any) -> tuple[str, Any]:
    """The placeholder for an argument (with its cast) and the value psycopg sends. Other
    values go untyped, so Postgres reads them as the named argument's declared type."""
    if isinstance(value, Mapping) or name in JSON_LISTS:
        return "%s::jsonb", None if value is None else Jsonb(value, _dumps)
    if isinstance(value, list | tuple):
        if value and all(isinstance(x, float) for x in value):
            # an array literal: psycopg's list dumper checks every number's text for quoting,
            # about 0.5 ms for a query's 256-number vector; repr() gives Postgres' float syntax
            return "%s::real[]", "{" + ",".join(map(repr, value)) + "}"
        return "%s::text[]", list(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return "%s::int", value
    return "%s", value


def statement(function: str, args: Mapping[str, Any], returns: Returns) -> tuple[str, list[Any]]:
    """The one statement of a call (base.py's `returns`) and its parameters."""
    bound = [(_name(name), *_bind(name, value)) for name, value in args.items()]
    params = [value for _, _, value in bound]
    if isinstance(returns, Select):  # rows of a table or view, as JSON, as PostgREST gives them
        where = " and ".join(f"{name} = {slot}" for name, slot, _ in bound) or "true"
        way = " desc" if returns.desc else ""
        shown = ", ".join(_name(c) for c in returns.columns) or "*"
        inner = f"select {shown} from public.{_name(function)} where {where} order by " + ", ".join(
            f"{_name(c)}{way}" for c in returns.order
        )
        if returns.limit is not None:
            inner += " limit %s::int"
            params.append(returns.limit)
        order = ", ".join(f"r.{c}{way}" for c in returns.order)
        return f"select coalesce(jsonb_agg(to_jsonb(r) order by {order}), '[]'::jsonb) from ({inner}) r", params
    call = f"public.{_name(function)}(" + ", ".join(f"{name} => {slot}" for name, slot, _ in bound) + ")"
    if returns == "value":
        return f"select {call}", params
    if returns == "rows":
        return f"select * from {call}", params
    if returns == "column":
        return f"select coalesce(array_agg(r.v order by r.n), '{{}}') from {call} with ordinality as r(v, n)", params
    raise ValueError(f"unknown returns: {returns!r}")


# what carries the calls: a pool, or the one connection of max_size=1
_Pool: TypeAlias = "AsyncConnectionPool[_KiwiConnection] | _OneConnection"


class PostgresBackend:
    """The registry's calls over Postgres. `url` is a libpq URL or conninfo string; `principal`
    is whom it acts as outside any `acting_as` (there is no default: choosing admin is explicit)."""

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
        self._pool: _Pool | None = None
        self._opening: asyncio.Lock | None = None
        self._retiring: set[asyncio.Task[None]] = set()  # old pools closing after a reconnect
        self._last_connect_error: BaseException | None = None
        # what the connection source in use raises when it was closed under a call, or gave no
        # connection in time: _OneConnection's, psycopg_pool's once a pool is made (_new_pool)
        self._closed_errors: tuple[type[Exception], ...] = (_SourceClosed,)
        self._timeout_errors: tuple[type[Exception], ...] = ()
        self.cache = PlanCache(url, connect_timeout) if cache_plans else None

    def __repr__(self) -> str:
        return f"PostgresBackend({redact(self._url)!r})"

    def apart(self, principal: Principal, *, max_size: int) -> PostgresBackend:
        """A backend of the same database with connections of its own, acting as `principal`,
        without a plan cache: for calls made always as one principal beside calls made as many
        (a worker's own calls beside its runs'), whose connections then never switch between
        them (a switch is one more statement and round trip)."""
        return PostgresBackend(
            self._url,
            principal=principal,
            min_size=1,
            max_size=max_size,
            connect_timeout=self._connect_timeout,
            timeout=self._timeout,
            cache_plans=False,
        )

    def caller(self) -> str:
        return current(self.principal).claims_json

    async def call(
        self, function: str, args: Mapping[str, Any], *, returns: Returns = "value", read: bool = False
    ) -> Any:
        query, params = statement(function, args, returns)
        if returns == "rows":
            return await self._rows(query, params, read=read)
        return await self._value(query, params, read=read)

    async def aclose(self) -> None:
        if self.cache is not None:
            await self.cache.aclose()
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

    async def _rows(self, query: str, params: Any, *, read: bool = True) -> list[dict[str, Any]]:
        """Every row, as dicts."""

        async def work(conn: Any) -> list[dict[str, Any]]:
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(query, params)
                return await cur.fetchall()

        return await self._run(work, read=read)

    async def _run(self, work: Callable[[Any], Awaitable[T]], *, read: bool) -> T:
        """`work` on a pooled connection set up for the principal; once more on a new pool
        when the connection was dead and the rule of the module docstring allows it."""
        pool = self._pool or await self._open_pool()
        for attempt in range(2):
            try:
                return await self._attempt(pool, work)
            except self._timeout_errors as exc:
                raise self._unavailable(self._last_connect_error or exc) from exc
            except psycopg.Error as exc:
                raise self._error(exc) from exc
            except _Died as died:
                if attempt or (died.may_have_run and not read):
                    raise self._dead(died.cause) from died.cause
            pool = await self._reopen(pool)
        raise AssertionError("unreachable")

    async def _attempt(self, pool: _Pool, work: Callable[[Any], Awaitable[T]]) -> T:
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
        except self._closed_errors as exc:  # replaced by a concurrent reconnect: nothing was sent
            raise _Died(exc, may_have_run=False) from exc

    async def _reopen(self, dead: _Pool) -> _Pool:
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
                hint=f"grant {who.role} to the login of KIWI_DATABASE_URL, as Supabase grants it to authenticator",
            ) from exc
        conn.kiwi_as = key

    def _lock(self) -> asyncio.Lock:
        if self._opening is None:
            self._opening = asyncio.Lock()
        return self._opening

    async def _open_pool(self) -> _Pool:
        async with self._lock():
            if self._pool is None:
                self._pool = await self._new_pool()
            return self._pool

    async def _new_pool(self) -> _Pool:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "connect_timeout": max(1, round(self._connect_timeout))}
        if self._max_size == 1:
            one = _OneConnection(self._url, kwargs)
            try:
                await one.open()
            except psycopg.OperationalError as exc:
                raise self._unavailable(exc) from exc
            return one
        from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

        self._closed_errors, self._timeout_errors = (_SourceClosed, PoolClosed), (PoolTimeout,)
        failed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        registry = self

        class _Connection(_KiwiConnection):
            """Tells the registry why a connection attempt failed (the pool only retries)."""

            @classmethod
            async def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
                try:
                    conn = await super().connect(conninfo, **kwargs)
                except psycopg.OperationalError as exc:
                    registry._last_connect_error = exc
                    if not failed.done():
                        failed.set_result(exc)
                    raise
                registry._last_connect_error = None
                return conn

        pool: AsyncConnectionPool[_KiwiConnection] = AsyncConnectionPool(
            self._url,
            connection_class=_Connection,
            kwargs=kwargs,
            min_size=self._min_size,
            max_size=self._max_size,
            timeout=self._timeout,
            name=POOL_NAME,
            open=False,
        )
        opened = asyncio.ensure_future(pool.open(wait=True, timeout=self._connect_timeout))
        either: set[asyncio.Future[Any]] = {opened, failed}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
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
            hint="start the local database with `make db`, or check KIWI_DB_PORT (its port) or KIWI_DATABASE_URL",
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


def pool_connections(backend: object) -> dict[str, float]:
    """The database pool's connections now, by state (open, idle, waiting: requests queued for
    one), for the `kiwi.db.pool.connections` gauge; empty before the pool opens or for a single
    connection."""
    pool = getattr(backend, "_pool", None)
    stats = getattr(pool, "get_stats", None)
    if stats is None:
        return {}
    now = stats()
    return {
        "open": float(now.get("pool_size", 0)),
        "idle": float(now.get("pool_available", 0)),
        "waiting": float(now.get("requests_waiting", 0)),
    }


class PostgresRegistry(Registry):
    """The typed `Registry` over a `PostgresBackend`, made from the same arguments."""

    backend: PostgresBackend

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
        super().__init__(
            PostgresBackend(
                url,
                principal=principal,
                min_size=min_size,
                max_size=max_size,
                connect_timeout=connect_timeout,
                timeout=timeout,
                cache_plans=cache_plans,
            )
        )

    def __repr__(self) -> str:
        return f"PostgresRegistry({redact(self.backend._url)!r})"

    @property
    def principal(self) -> Principal:
        """Whom it acts as outside any `acting_as`."""
        return self.backend.principal

    @property
    def _plan_cache(self) -> PlanCache | None:  # what tests look into
        return self.backend.cache
