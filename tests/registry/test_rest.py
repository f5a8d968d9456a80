"""RestRegistry (supabase-py) against a FAKE of PostgREST's HTTP surface.

No PostgREST server can run on these machines (it is in no reachable registry, and
there is no Docker), so these tests inject an `httpx.MockTransport` into supabase-py
(`AsyncClientOptions(httpx_client=...)`, built by RestRegistry from its `transport`).
The fake, `FakePostgREST`, checks each request as PostgREST would receive it (method,
`/rest/v1/rpc/<function>` or `/rest/v1/<table>`, the JSON body with the `p_*` argument
names, the `apikey` and `Authorization: Bearer` headers, the schema profile headers)
and answers the way PostgREST does, by calling the REAL function of the local database
with the received arguments, under the role the key stands for, or the claims of a
user's JWT verified with the project's JWT secret (`set_config('role', ...)` and
`request.jwt.claims`, as PostgREST does): 200 with the function's JSON (an
array for set-returning functions), or PostgREST's error body `{code, message,
details, hint}` with PostgREST's HTTP status for the SQLSTATE.

One live test runs against a hosted Supabase project when SUPABASE_URL and a key are
in the environment; the project must have Kiwi's migrations and seed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import jwt
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Json

from runner import KiwiError, NotFound, Refused, RegistryUnavailable, RestRegistry, UsageError
from runner.registry.base import RUN_LIST_COLUMNS
from runner.registry.errors import from_sqlstate

URL = "https://kiwi-test.supabase.co"
SERVICE_KEY = "sb_secret_kiwi_test_key"
ANON_KEY = "sb_publishable_kiwi_test_key"
ROLES = {SERVICE_KEY: "service_role", ANON_KEY: "anon"}
JWT_SECRET = "kiwi-test-project-jwt-secret-0123456789"  # the fake project's, as Supabase Auth signs with


def user_token(user_id: uuid.UUID, *, secret: str = JWT_SECRET, expires_in: int = 3600) -> str:
    """An access token as Supabase Auth issues one to a signed-in user (HS256)."""
    now = int(time.time())
    claims = {"sub": str(user_id), "role": "authenticated", "aud": "authenticated", "iat": now, "exp": now + expires_in}
    return jwt.encode(claims, secret, algorithm="HS256")


def pgrst_status(code: str, role: str) -> int:
    """PostgREST's HTTP status for a SQLSTATE (docs.postgrest.org, references/errors)."""
    if re.fullmatch(r"PT\d{3}", code):
        return int(code[2:])
    exact = {"23503": 409, "23505": 409, "25006": 405, "53400": 500, "P0001": 400, "42883": 404, "42P01": 404}
    if code in exact:
        return exact[code]
    if code == "42501":
        return 401 if role == "anon" else 403
    prefixes = {"08": 503, "09": 500, "0L": 403, "0P": 403, "25": 500, "28": 403, "2D": 500, "38": 500, "39": 500,
                "3B": 500, "40": 500, "53": 503, "54": 500, "55": 500, "57": 500, "58": 500, "F0": 500, "HV": 500,
                "P0": 500, "XX": 500}  # fmt: skip
    return prefixes.get(code[:2], 400)


def error_response(status: int, code: str, message: str, details: Any = None, hint: Any = None) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "details": details, "hint": hint, "message": message})


class FakePostgREST:
    """A fake of PostgREST's HTTP surface, answering from the real local database."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.requests: list[httpx.Request] = []
        self.responses: list[httpx.Response] = []  # what each request was answered, in order

    def close(self) -> None:
        self.conn.close()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.answer(request)
        self.responses.append(response)
        return response

    def answer(self, request: httpx.Request) -> httpx.Response:
        key = request.headers.get("apikey")
        assert key in ROLES, f"apikey header missing or unknown: {key!r}"
        assert request.url.scheme == "https" and request.url.host == "kiwi-test.supabase.co"
        path = request.url.path
        assert path.startswith("/rest/v1/"), path
        bearer = request.headers.get("authorization", "")
        assert bearer.startswith("Bearer "), bearer
        role: dict[str, Any] = {"role": ROLES[key]}  # the claims the request runs with
        if bearer != f"Bearer {key}":  # a user's JWT: PostgREST verifies it and runs as its claims
            try:
                token = bearer.removeprefix("Bearer ")
                role = jwt.decode(token, JWT_SECRET, algorithms=["HS256"], audience="authenticated")
            except jwt.InvalidTokenError as exc:
                return error_response(401, "PGRST301", str(exc))
        if path.startswith("/rest/v1/rpc/"):
            assert request.method == "POST"
            assert request.headers.get("content-type") == "application/json"
            assert request.headers.get("content-profile") == "public"
            return self.rpc(path.removeprefix("/rest/v1/rpc/"), json.loads(request.content), role)
        assert request.method == "GET", request.method
        assert request.headers.get("accept-profile") == "public"
        return self.select(path.removeprefix("/rest/v1/"), request.url.params, role)

    def _as(self, claims: dict[str, Any], cur: psycopg.Cursor) -> None:
        cur.execute(
            "select set_config('role', %s, true), set_config('request.jwt.claims', %s, true)",
            (claims["role"], json.dumps(claims)),
        )

    def rpc(self, function: str, body: dict[str, Any], role: dict[str, Any]) -> httpx.Response:
        found = self.conn.execute(
            """select p.proretset,
                      array(select a.name from unnest(p.proargnames, coalesce(p.proargmodes, array_fill('i'::"char",
                                   array[cardinality(p.proargnames)]))) with ordinality a(name, mode, n)
                             where a.mode in ('i', 'b', 'v') order by a.n),
                      array(select format_type(t, null) from unnest(p.proargtypes) t)
                 from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                where n.nspname = 'public' and p.proname = %s""",
            (function,),
        ).fetchall()
        match = [(retset, dict(zip(names, types, strict=True))) for retset, names, types in found
                 if set(body) <= set(names)]  # fmt: skip
        if not match:
            args = ", ".join(sorted(body))
            return error_response(
                404,
                "PGRST202",
                f"Could not find the function public.{function}({args}) in the schema cache",
                hint="If a new function was created in the database with this name and parameters, "
                "try reloading the schema cache.",
            )
        retset, argtypes = match[0]
        columns = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(a), sql.SQL(argtypes[a])) for a in body)
        call = sql.SQL("public.{}({})").format(
            sql.Identifier(function),
            sql.SQL(", ").join(sql.SQL("{} := _.{}").format(sql.Identifier(a), sql.Identifier(a)) for a in body),
        )
        source = sql.SQL("json_to_record(%s::json) as _({})").format(columns) if body else sql.SQL("(select) _")
        if retset:
            query = sql.SQL("select coalesce(json_agg(c), '[]')::text from {}, lateral {} c").format(source, call)
        else:
            query = sql.SQL("select to_json({})::text from {}").format(call, source)
        return self._run(query, (Json(body),) if body else (), role)

    def select(self, table: str, params: httpx.QueryParams, role: dict[str, Any]) -> httpx.Response:
        assert set(params) <= {"select", "order", "limit", "tool_id"}, params
        chosen = params.get("select") or "*"  # PostgREST's column list: * or names
        shown = sql.SQL("*") if chosen == "*" else sql.SQL(", ").join(map(sql.Identifier, chosen.split(",")))
        exists = self.conn.execute("select to_regclass(%s) is not null", (f"public.{table}",)).fetchone()[0]
        if not exists:
            return error_response(404, "PGRST205", f"Could not find the table 'public.{table}' in the schema cache")
        where, args = sql.SQL("true"), []
        if "tool_id" in params:
            op, _, value = params["tool_id"].partition(".")
            assert op == "eq"
            where, args = sql.SQL("tool_id = %s"), [value]
        order = sql.SQL("")
        if "order" in params:
            column, direction = params["order"].split(".")[:2]
            assert direction in ("asc", "desc")
            order = sql.SQL("order by {} {}").format(sql.Identifier(column), sql.SQL(direction))
        limit = sql.SQL("limit {}").format(sql.Literal(int(params["limit"]))) if "limit" in params else sql.SQL("")
        query = sql.SQL(
            "select coalesce(json_agg(_), '[]')::text from (select {} from public.{} where {} {} {}) _"
        ).format(shown, sql.Identifier(table), where, order, limit)
        return self._run(query, args, role)

    def _run(self, query: sql.Composable, args: Any, role: dict[str, Any]) -> httpx.Response:
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                self._as(role, cur)
                cur.execute(query, args)
                text = cur.fetchone()[0]
        except psycopg.Error as exc:
            d = exc.diag
            code = exc.sqlstate or "XX000"
            status = pgrst_status(code, role["role"])
            return error_response(status, code, d.message_primary, d.message_detail, d.message_hint)
        return httpx.Response(200, content=(text or "null").encode(), headers={"content-type": "application/json"})


@pytest.fixture
def fake(database_url: str) -> Iterator[FakePostgREST]:
    server = FakePostgREST(database_url)
    yield server
    server.close()


@pytest.fixture
async def reg(fake: FakePostgREST) -> AsyncIterator[RestRegistry]:
    registry = RestRegistry(URL, SERVICE_KEY, transport=httpx.MockTransport(fake))
    yield registry
    await registry.aclose()


@pytest.fixture
def fresh_tool(conn: psycopg.Connection) -> Iterator[str]:
    name = f"registry_rest_{uuid.uuid4().hex[:10]}"
    yield name
    conn.execute("delete from tools where ref = %s", (name,))


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


async def test_execution_plan_is_one_rpc_with_postgrest_argument_names(
    reg: RestRegistry, fake: FakePostgREST, database_url: str
) -> None:
    plan = await reg.execution_plan("hello_world")
    assert len(fake.requests) == 1, "creating the client sends nothing; the plan is one request"
    request = fake.requests[0]
    assert (request.method, request.url.path) == ("POST", "/rest/v1/rpc/resolve_execution_plan")
    assert body_of(request) == {"p_tool_id": "hello_world"}
    with psycopg.connect(database_url) as conn:
        expected = conn.execute("select resolve_execution_plan('hello_world')").fetchone()[0]
    assert plan == expected
    pinned = await reg.execution_plan("hello_world", plan["version"])
    assert body_of(fake.requests[-1]) == {"p_tool_id": "hello_world", "p_version": plan["version"]}
    assert pinned["version"] == plan["version"]


async def test_chain_and_batch_are_json_arrays_of_rows(reg: RestRegistry, fake: FakePostgREST) -> None:
    rows = await reg.chain("hello_world")
    assert fake.requests[-1].url.path == "/rest/v1/rpc/resolve_executor_chain"
    assert [r["depth"] for r in rows] == list(range(len(rows))) and rows[-1]["tool_type"] == "primitive"
    batch = await reg.chains_batch(["hello_world", "no_such_tool_zz"])
    assert body_of(fake.requests[-1]) == {"p_tool_ids": ["hello_world", "no_such_tool_zz"]}
    bad = [r for r in batch if r["requested_tool_id"] == "no_such_tool_zz"]
    assert len(bad) == 1 and bad[0]["depth"] is None and "no_such_tool_zz" in bad[0]["error"]


async def test_search(reg: RestRegistry, fake: FakePostgREST) -> None:
    rows = await reg.search("hello world")
    assert body_of(fake.requests[-1]) == {"p_query": "hello world", "p_limit": 20}
    assert rows[0]["tool_id"] == "hello_world"
    typed = await reg.search("", tool_type="primitive", limit=50)
    assert body_of(fake.requests[-1]) == {"p_query": "", "p_limit": 50, "p_tool_type": "primitive"}
    assert typed and {r["tool_type"] for r in typed} == {"primitive"}


async def test_publish_and_its_refusals(reg: RestRegistry, fake: FakePostgREST, fresh_tool: str) -> None:
    manifest = {"tool_id": fresh_tool, "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}
    files = [{"path": "main.sh", "content_text": "echo hi"}]
    first = await reg.publish(manifest, files, "tool_id: x\n")
    assert body_of(fake.requests[-1]) == {"p_manifest": manifest, "p_files": files, "p_manifest_yaml": "tool_id: x\n"}
    assert first["created"] is True
    again = await reg.publish(manifest, files)
    assert again["unchanged"] is True and again["content_hash"] == first["content_hash"]
    with pytest.raises(Refused, match="already published with different content") as info:
        await reg.publish(manifest, [{"path": "main.sh", "content_text": "echo other"}])
    assert "new version" in (info.value.hint or "")


async def test_delete_tool_is_an_rpc_refused_while_others_run_on_the_tool(
    reg: RestRegistry, fake: FakePostgREST, fresh_tool: str
) -> None:
    with pytest.raises(Refused, match="hello_world"):
        await reg.delete_tool("bash_runtime")
    await reg.publish({"tool_id": fresh_tool, "tool_type": "knowledge", "version": "1.0.0"}, [])
    await reg.delete_tool(fresh_tool)
    assert body_of(fake.requests[-1]) == {"p_tool_id": fresh_tool}
    assert fake.requests[-1].url.path == "/rest/v1/rpc/delete_tool"
    with pytest.raises(NotFound):
        await reg.execution_plan(fresh_tool)


async def test_bad_manifest_is_a_usage_error_with_its_problems(reg: RestRegistry, fresh_tool: str) -> None:
    manifest = {"tool_id": fresh_tool, "tool_type": "script", "executor": "bash_runtime", "version": "1.0"}
    with pytest.raises(UsageError) as info:
        await reg.publish(manifest, [{"path": "main.sh", "content_text": "x"}])
    assert any(p.startswith("version:") for p in info.value.problems)
    assert info.value.hint == "fix the fields named above; nothing was published"


async def test_unknown_tool_is_not_found(reg: RestRegistry) -> None:
    with pytest.raises(NotFound, match="no_such_tool_zz"):
        await reg.execution_plan("no_such_tool_zz")


async def test_anonymous_publish_is_refused(fake: FakePostgREST, fresh_tool: str) -> None:
    manifest = {"tool_id": fresh_tool, "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}
    async with RestRegistry(URL, ANON_KEY, transport=httpx.MockTransport(fake)) as anon:
        with pytest.raises(Refused, match="cannot publish") as info:
            await anon.publish(manifest, [{"path": "main.sh", "content_text": "echo"}])
        assert "sign in" in (info.value.hint or "")
        assert (await anon.execution_plan("hello_world"))["tool_id"] == "hello_world"
    assert fake.requests[0].headers["apikey"] == ANON_KEY


async def test_anonymous_callers_cannot_record_runs(fake: FakePostgREST) -> None:
    """Needs schema file 210_run_records.sql."""
    async with RestRegistry(URL, ANON_KEY, transport=httpx.MockTransport(fake)) as anon:
        with pytest.raises(Refused):
            await anon.record_run({"tool_id": "hello_world", "status": "success"})


async def test_record_audit_and_take_rate_limit_are_rpcs(
    reg: RestRegistry, fake: FakePostgREST, conn: psycopg.Connection
) -> None:
    """Needs schema files 240_audit.sql and 250_rate_limits.sql."""
    session = f"registry-rest-{uuid.uuid4()}"
    tool = f"rl_rest_{uuid.uuid4().hex[:8]}"
    limit_id = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 1, 60) returning id", (tool,)
    ).fetchone()[0]
    try:
        first = await reg.take_rate_limit(tool, None, session)
        assert body_of(fake.requests[-1]) == {"p_tool_id": tool, "p_server": None, "p_session": session}
        assert fake.requests[-1].url.path == "/rest/v1/rpc/take_rate_limit"
        second = await reg.take_rate_limit(tool, None, session)
        entry = {"session_id": session, "tool_id": tool, "decision": "refused", "reason": "rate limit"}
        audit_id = await reg.record_audit(entry)
        assert body_of(fake.requests[-1]) == {"p_entry": entry}
        caller = conn.execute("select caller from audit_log where id = %s", (audit_id,)).fetchone()[0]
    finally:
        conn.execute("delete from rate_limits where id = %s", (limit_id,))
        conn.execute("delete from audit_log where session_id = %s", (session,))
    assert first["allowed"] is True and second["allowed"] is False and second["retry_after_s"] is not None
    assert caller == "role:service_role"
    async with RestRegistry(URL, ANON_KEY, transport=httpx.MockTransport(fake)) as anon:
        anon_id = await anon.record_audit(entry)  # every call is audited, an anonymous one too
    row = conn.execute("select caller, caller_role from audit_log where id = %s", (anon_id,)).fetchone()
    conn.execute("delete from audit_log where session_id = %s", (session,))
    assert row == ("role:anon", "anon"), "an anonymous caller's row is written in its name"


async def test_runs_is_a_table_select_newest_first(
    reg: RestRegistry, fake: FakePostgREST, conn: psycopg.Connection
) -> None:
    """Needs public.record_run and public.tool_runs (schema file 210_run_records.sql)."""
    record = {"tool_id": "hello_world", "version": "1.0.0", "status": "success", "exit_code": 0, "duration_ms": 3,
              "executor_chain": ["hello_world", "bash_runtime", "subprocess"]}  # fmt: skip
    run_id = await reg.record_run(record)
    request = fake.requests[-1]
    try:
        rows = await reg.runs(tool_id="hello_world", limit=5)
    finally:
        conn.execute("delete from tool_runs where id = %s", (run_id,))
    assert body_of(request) == {"p_run": record}
    assert uuid.UUID(run_id)
    request = fake.requests[-1]
    assert (request.method, request.url.path) == ("GET", "/rest/v1/tool_runs")
    listed = ",".join(RUN_LIST_COLUMNS)  # every column but the payload
    assert dict(request.url.params) == {"select": listed, "tool_id": "eq.hello_world", "order": "started_at.desc",
                                        "limit": "5"}  # fmt: skip
    assert [r["executor_chain"] for r in rows if r["id"] == run_id] == [record["executor_chain"]]


async def test_record_runs_writes_a_batch_in_one_request(
    reg: RestRegistry, fake: FakePostgREST, conn: psycopg.Connection
) -> None:
    chosen = str(uuid.uuid4())
    records = [{"id": chosen, "tool_id": "hello_world", "status": "success"},
               {"tool_id": "hello_world", "status": "timeout"}]  # fmt: skip
    before = len(fake.requests)
    ids = await reg.record_runs(records)
    try:
        assert len(fake.requests) == before + 1, "one HTTP request for the whole batch"
        assert body_of(fake.requests[-1]) == {"p_runs": records}
        assert fake.requests[-1].url.path == "/rest/v1/rpc/record_runs"
        assert ids[0] == chosen and len(ids) == 2
        statuses = conn.execute("select status from tool_runs where id = any(%s::uuid[])", (ids,)).fetchall()
        assert sorted(s for (s,) in statuses) == ["success", "timeout"]
    finally:
        conn.execute("delete from tool_runs where id = any(%s::uuid[])", (ids,))


async def test_a_missing_function_or_table_says_to_migrate(reg: RestRegistry, fake: FakePostgREST) -> None:
    with pytest.raises(RegistryUnavailable, match="missing") as info:
        await reg.backend.call("no_such_function_zz", {"p_x": 1})
    assert "migrations" in (info.value.hint or "")


async def test_connection_errors_are_registry_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    async with RestRegistry(URL, SERVICE_KEY, transport=httpx.MockTransport(refuse)) as reg:
        with pytest.raises(RegistryUnavailable, match="cannot reach the Supabase API") as info:
            await reg.execution_plan("hello_world")
        assert SERVICE_KEY not in str(info.value)
        with pytest.raises(RegistryUnavailable):
            await reg.runs()  # a GET: not retried


async def test_a_closed_port_is_registry_unavailable() -> None:
    async with RestRegistry("http://127.0.0.1:1", SERVICE_KEY, timeout=3) as reg:
        with pytest.raises(RegistryUnavailable, match=re.escape("127.0.0.1:1")):
            await reg.search("hello")


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (503, {"code": "PGRST001", "message": "Database client error. Retrying the connection.",
               "details": None, "hint": None}, RegistryUnavailable),
        (502, "<html>Bad Gateway</html>", RegistryUnavailable),
        (401, {"message": "Invalid API key", "hint": "Double check your Supabase `anon` or `service_role` API key."},
         RegistryUnavailable),
        (401, {"code": "PGRST301", "message": "JWT expired", "details": None, "hint": None}, Refused),
        (422, {"code": "PT422", "message": "executor cycle: a -> b -> a", "details": None, "hint": None}, Refused),
        (400, {"code": "P0001", "message": "boom", "details": None, "hint": None}, KiwiError),
    ],
)  # fmt: skip
async def test_postgrest_and_gateway_errors_are_mapped(status: int, body: Any, kind: type[KiwiError]) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers={"content-type": "text/html"})
        return httpx.Response(status, json=body)

    async with RestRegistry(URL, SERVICE_KEY, transport=httpx.MockTransport(answer)) as reg:
        with pytest.raises(kind) as info:
            await reg.execution_plan("hello_world")
    assert type(info.value) is kind


@pytest.mark.parametrize(
    ("code", "kind"),
    [("PT404", NotFound), ("PT422", Refused), ("PT409", Refused), ("42501", Refused), ("22023", UsageError),
     ("08006", RegistryUnavailable), ("42883", RegistryUnavailable), ("PGRST205", RegistryUnavailable)],
)  # fmt: skip
def test_sqlstate_table(code: str, kind: type[KiwiError]) -> None:
    assert type(from_sqlstate(code, "m")) is kind


def test_usage_error_lists_the_problems_from_the_detail() -> None:
    err = from_sqlstate("22023", "invalid manifest: a; b", detail='["a: bad", "b: worse"]', hint="fix")
    assert err.problems == ["a: bad", "b: worse"]  # type: ignore[attr-defined]
    assert err.message == "invalid manifest:\n  - a: bad\n  - b: worse" and err.hint == "fix"


LIVE_KEY = (
    os.environ.get("SUPABASE_KEY") or os.environ.get("SUPABASE_SERVICE_ROLE_KEY") or os.environ.get("SUPABASE_ANON_KEY")
)


@pytest.mark.skipif(
    not (os.environ.get("SUPABASE_URL") and LIVE_KEY),
    reason="live Supabase test: set SUPABASE_URL and SUPABASE_KEY (or SUPABASE_ANON_KEY) for a project with "
    "Kiwi's migrations and seed; the hosted service is not reachable from these machines",
)
async def test_live_supabase_project() -> None:
    async with RestRegistry(os.environ["SUPABASE_URL"], LIVE_KEY or "") as reg:
        plan = await reg.execution_plan("hello_world")
        assert plan["primitive"] == "subprocess"
        assert (await reg.search("hello world"))[0]["tool_id"] == "hello_world"
        with pytest.raises(NotFound):
            await reg.execution_plan("no_such_tool_zz")


async def test_a_token_from_a_kiwi_login_session_is_renewed_before_it_expires(fake: FakePostgREST) -> None:
    """Regression: a long-lived process (`kiwi serve` over stdio) acting as a `kiwi login` session
    sent the access token it started with for ever, and PostgREST refused every request once it
    expired, an hour in. With `renew`, a fresh token of the session goes out from shortly before
    the first one expires (once for concurrent calls), while the backend still serves only the
    caller it was configured for."""
    from runner import acting_as, from_token

    user = uuid.uuid4()
    first, fresh = user_token(user, expires_in=30), user_token(user, expires_in=3600)  # the first within the margin
    renewals: list[str] = []

    def renew() -> tuple[str, float]:
        renewals.append(fresh)
        return fresh, time.time() + 3600

    transport = httpx.MockTransport(fake)
    async with RestRegistry(URL, ANON_KEY, access_token=first, transport=transport, renew=renew) as reg:
        found = await asyncio.gather(*(reg.search("hello world") for _ in range(5)))
        assert all(rows[0]["tool_id"] == "hello_world" for rows in found)
        assert renewals == [fresh], "renewed once, before the first request"
        sent = {r.headers["authorization"] for r in fake.requests}
        assert sent == {f"Bearer {fresh}"}, "the expiring token was never sent"
        caller = from_token(first, secret=JWT_SECRET, audience="authenticated")
        with acting_as(caller):  # the caller it serves is still the one it was configured with
            assert (await reg.execution_plan("hello_world"))["tool_id"] == "hello_world"
        assert renewals == [fresh], "a fresh token is used as it is"
        stranger = from_token(user_token(uuid.uuid4()), secret=JWT_SECRET, audience="authenticated")
        with acting_as(stranger), pytest.raises(Refused, match="acts only as the token"):
            await reg.search("hello")


async def test_a_session_that_cannot_be_renewed_sends_nothing_and_says_sign_in_again(fake: FakePostgREST) -> None:
    def renew() -> tuple[str, float]:
        raise Refused("the kiwi login session this process acts for is gone", hint="sign in again with `kiwi login`")

    expiring = user_token(uuid.uuid4(), expires_in=10)
    transport = httpx.MockTransport(fake)
    async with RestRegistry(URL, ANON_KEY, access_token=expiring, transport=transport, renew=renew) as reg:
        with pytest.raises(Refused, match="is gone") as caught:
            await reg.search("hello")
    assert caught.value.hint and "kiwi login" in caught.value.hint
    assert fake.requests == [], "no request went out with a token about to expire"


async def test_a_token_given_explicitly_is_sent_as_it_is(fake: FakePostgREST) -> None:
    """KIWI_ACCESS_TOKEN set by hand (no `kiwi login` session behind it) is never renewed."""
    given = user_token(uuid.uuid4(), expires_in=30)
    async with RestRegistry(URL, ANON_KEY, access_token=given, transport=httpx.MockTransport(fake)) as reg:
        await reg.search("hello")
    assert fake.requests[-1].headers["authorization"] == f"Bearer {given}"
