"""Each method of the typed Registry calls its SQL function as the database declares it.

A recording backend notes what every method sends, once with every optional argument given
and once with none; the real database's catalogue (pg_proc, read only) must agree: the
function exists in `public`, the argument names are its declared ones (all of them when
all are given; any left out has an SQL default), `returns` matches what it returns (one
value, a table, or a set of one column), a call marked `read` is of a function that cannot
write (stable), and the Postgres backend sends as jsonb exactly the arguments declared
jsonb (a dict, or a list it knows to be JSON: JSON_LISTS). Each statement the Postgres
backend would send is then prepared by the server, which resolves it without running it.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Mapping
from typing import Any

import psycopg
import pytest

from runner import Registry
from runner.registry import Select
from runner.registry.memory import Sent
from runner.registry.postgres import JSON_LISTS, statement

ID = str(uuid.uuid4())
M: dict[str, Any] = {"tool_id": "t", "tool_type": "knowledge", "version": "1.0.0"}
F: list[dict[str, Any]] = [{"path": "k.md", "content_text": "k"}]

# method: (the arguments of a call with every optional one given, of a call with none)
CALLS: dict[str, tuple[tuple[tuple[Any, ...], dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "execution_plan": ((("t", "1.0.0"), {}), (("t",), {})),
    "chain": ((("t", "1.0.0"), {}), (("t",), {})),
    "chains_batch": (((["t"],), {}), (([],), {})),
    "chains_compact": (((["t"],), {}), (([],), {})),
    "search": (
        (("q",), {"tool_type": "script", "category": "c", "limit": 5, "embedding": [0.0625] * 256, "model": "m"}),
        (("q",), {}),
    ),
    "pending_search_texts": ((("m", 5), {"after": "0" * 64, "every": True}), (("m",), {})),
    "store_search_embeddings": (
        (("m", [{"text_hash": "0" * 64, "embedding": [0.0625] * 256}]), {}),
        (("m", []), {}),
    ),
    "publish": (((M, F, "tool_id: t", {"signature": "s"}, ID), {}), ((M, F), {})),
    "request_publish_approval": (((M, F, "s"), {}), ((M, F), {})),
    "sign": ((("t", "1.0.0", "h", "k", "s"), {}), (("t", "1.0.0", "h", "k", "s"), {})),
    "signature_states": (((["t"],), {}), (([],), {})),
    "attestations": ((("t", "1.0.0"), {}), (("t",), {})),
    "preview_plan": (((M, F), {}), ((M, []), {})),
    "version_source": ((("t", "1.0.0"), {}), (("t",), {})),
    "delete_tool": ((("t",), {}), (("t",), {})),
    "yank": ((("t", "1.0.0", "why"), {}), (("t", "1.0.0"), {})),
    "deprecate": ((("t", "1.0.0", "use u"), {}), (("t", "1.0.0"), {})),
    "record_run": ((({"tool_id": "t"},), {}), (({"tool_id": "t"},), {})),
    "record_runs": ((([{"tool_id": "t"}],), {}), (([],), {})),
    "runs": (((), {"tool_id": "t", "limit": 5}), ((), {})),
    "record_audit": ((({"tool_id": "t"},), {}), (({"tool_id": "t"},), {})),
    "whoami": (((), {}), ((), {})),
    "operator_status": (((), {}), ((), {})),
    "record_audits": ((([{"tool_id": "t"}],), {}), (([],), {})),
    "record_calls": ((([{"tool_id": "t"}], [{"tool_id": "t"}]), {}), (([], []), {})),
    "check_call": ((({"tool_id": "t"},), {}), (({"tool_id": "t"},), {})),
    "admit_call": ((({"tool_id": "t", "context_id": ID},), {}), (({"tool_id": "t"},), {})),
    "take_rate_limit": ((("t", "srv", "s"), {}), (("t", None, None), {})),
    "decide_approval": (((ID, True, "ok", "s"), {}), ((ID, False), {})),
    "approvals": (((), {}), ((), {})),
    "attach_approval_parameters": (((ID, {"target": "prod"}), {}), ((ID, {}), {})),
    "unembedded_tools": ((("m", ["t"]), {}), (("m", []), {})),
    "prune_search_embeddings": (((["m"],), {"idle_s": 60.0}), (([],), {})),
    "hold_mcp_change": (((M,), {}), ((M,), {})),
    "mcp_changes": (((), {"server": "s", "status": "pending"}), ((), {"status": None})),
    "decide_mcp_change": (((ID, True, "ok"), {}), ((ID, False), {})),
    "limits": (((), {}), ((), {})),
    "open_context": ((("s", "d", ID, {"tools": []}), {}), (("s",), {})),
    "get_context": (((ID,), {}), ((ID,), {})),
    "record_checkpoint": ((({"run_id": ID},), {}), (({"run_id": ID},), {})),
    "rollback_checkpoint": (((ID,), {}), ((ID,), {})),
    "checkpoint_restored": (((ID,), {}), ((ID,), {})),
    "model_price": ((("m",), {}), (("m",), {})),
    "record_thread_usage": ((({"session_id": "s"},), {}), (({"session_id": "s"},), {})),
}


class Recorder:
    """A backend that notes each call and answers nothing."""

    cache = None

    def __init__(self) -> None:
        self.calls: list[Sent] = []

    def caller(self) -> str:
        return "recorder"

    async def call(self, function: str, args: Mapping[str, Any], *, returns: Any = "value", read: bool = False) -> Any:
        self.calls.append(Sent(function, dict(args), returns, read))
        return None

    async def aclose(self) -> None: ...


FUNCTIONS_SQL = """
select p.proname, p.proretset, p.provolatile, p.pronargdefaults, 't' = any(coalesce(p.proargmodes, '{}')),
       array(select a.name
               from unnest(coalesce(p.proargnames, '{}'), coalesce(p.proargmodes, array_fill('i'::"char",
                           array[cardinality(coalesce(p.proargnames, '{}'))]))) with ordinality a(name, mode, n)
              where a.mode in ('i', 'b', 'v') order by a.n),
       array(select format_type(t, null) from unnest(p.proargtypes) t)
  from pg_proc p
 where p.pronamespace = 'public'::regnamespace
"""


@pytest.fixture(scope="module")
def catalogue(database_url: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    with psycopg.connect(database_url) as conn:
        for name, retset, volatile, defaults, table, names, types in conn.execute(FUNCTIONS_SQL):
            types_of = dict(zip(names, types, strict=True))
            kind = {"retset": retset, "volatile": volatile, "defaults": defaults, "table": table}
            found.setdefault(name, []).append({**kind, "names": list(names), "types": types_of})
    return found


async def sent(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sent:
    backend = Recorder()
    await getattr(Registry(backend), method)(*args, **kwargs)
    assert len(backend.calls) == 1, f"{method} is one call"
    return backend.calls[0]


def test_every_method_is_in_the_table() -> None:
    methods = {n for n, f in inspect.getmembers(Registry, inspect.iscoroutinefunction) if not n.startswith("_")}
    assert methods - {"plan", "aclose", "__aenter__", "__aexit__"} == set(CALLS)


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_each_method_calls_its_function_with_the_declared_names(
    method: str, catalogue: dict[str, list[dict[str, Any]]]
) -> None:
    full, bare = [await sent(method, *call) for call in CALLS[method]]
    assert (full.function, full.read) == (bare.function, bare.read)
    if isinstance(full.returns, Select):
        return  # a table or view: test_selects_name_real_columns
    assert full.returns == bare.returns
    assert full.function in catalogue, f"public.{full.function} is not in the database"
    match = [f for f in catalogue[full.function] if set(full.args) == set(f["names"])]
    assert match, f"{method} sends {sorted(full.args)}; public.{full.function} declares {catalogue[full.function]}"
    fn = match[0]
    defaulted = set(fn["names"][len(fn["names"]) - fn["defaults"] :])
    assert set(full.args) - set(bare.args) <= defaulted, f"{method} leaves out an argument without a default"
    expected = "value" if not fn["retset"] else "rows" if fn["table"] else "column"
    assert full.returns == expected, f"{method}: public.{full.function} returns {expected}"
    assert full.read == (fn["volatile"] != "v"), f"{method}: read exactly when the function cannot write"
    for name, type_ in fn["types"].items():
        as_json = isinstance(full.args[name], Mapping) or name in JSON_LISTS
        assert as_json == (type_ == "jsonb"), f"{full.function}({name} {type_}) is sent as jsonb: {as_json}"


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_the_postgres_statements_resolve_in_the_database(method: str, conn: psycopg.Connection) -> None:
    """Prepared, not run: the server finds the function for the names and casts given."""
    for call in CALLS[method]:
        one = await sent(method, *call)
        query, params = statement(one.function, one.args, one.returns)
        parts = query.split("%s")
        numbered = parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))
        assert len(parts) - 1 == len(params)
        name = f"kiwi_sig_{uuid.uuid4().hex[:8]}".encode()
        result = conn.pgconn.prepare(name, numbered.encode())
        assert result.status == psycopg.pq.ExecStatus.COMMAND_OK, (numbered, result.error_message.decode())
        conn.execute(f"deallocate {name.decode()}")


@pytest.mark.parametrize("method", ["runs", "approvals", "limits"])
async def test_selects_name_real_columns(method: str, conn: psycopg.Connection) -> None:
    for call in CALLS[method]:
        one = await sent(method, *call)
        assert isinstance(one.returns, Select)
        columns = {
            c
            for (c,) in conn.execute(
                "select column_name from information_schema.columns where table_schema = 'public' and table_name = %s",
                (one.function,),
            )
        }
        assert columns, f"public.{one.function} is not a table or view"
        assert set(one.args) | set(one.returns.order) | set(one.returns.columns) <= columns
