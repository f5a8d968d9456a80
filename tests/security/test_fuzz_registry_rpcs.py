"""Every registry RPC a signed-in user may call ends in a result or in an error Kiwi raises on
purpose, and a refused call leaves the registry as it was.

Hypothesis calls the public.* functions granted to `authenticated` directly through psycopg,
as PostgREST would: the role and `request.jwt.claims` of a throwaway user who owns a namespace
holding one published script (committed once per module, deleted at the end). Each example
runs in a transaction that is rolled back, its call in a savepoint. The functions are read
from the catalog, so an RPC added later is fuzzed too; publish_tool_version, check_call and
the approval RPCs also get arguments made from their own fields, and the namespace tables
(users create namespaces and members by insert, not by RPC) get generated rows.

Arguments are always valid values of the declared types: a text without NUL, JSON that
jsonb accepts, an int4 in range. What cannot even be encoded as the argument's type is the
transport's to refuse (PostgREST answers 400 before the function runs); what happens inside
the function is Kiwi's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from tests.test_fuzz import files_strategy, finite_json, manifests, near_valid

# The errors Kiwi raises on purpose (`raise exception ... using errcode = ...` in
# supabase/migrations, plus the constraints and RLS policies it declares): each carries a
# message naming what was wrong. Anything else (XX000 internal errors, 22P02 "invalid input
# syntax for type uuid" from a cast inside a function, 54001 stack depth, 2201B bad regex,
# 22001 value too long, 42883/42804 type errors in the function's own SQL) is a bug: the
# caller gets a raw database error that names no field.
ACCEPTED_SQLSTATES = {
    "22023",  # invalid_parameter_value: Kiwi's checks of a manifest, a call, a limit
    "23001",  # restrict_violation: a namespace that still holds tools (tools_namespace_fkey)
    "23502",  # not_null_violation: raised by Kiwi for a missing required value
    "23503",  # foreign_key_violation: a namespace or tool that does not exist
    "23505",  # unique_violation: a namespace or member that already exists
    "23514",  # check_violation: Kiwi's checks and the tables' named constraints
    "42501",  # insufficient_privilege: RLS and Kiwi's "you cannot ..." refusals
    "P0001",  # raise_exception: Kiwi's plain `raise exception '...'` (tools.sql, semver.sql)
    "PT404",  # PostgREST's 404: not found (or not visible to the caller)
    "PT409",  # PostgREST's 409: conflicts (a version that exists, an approval decided)
    "PT422",  # PostgREST's 422: well-formed but refused (approvals, signatures)
}
EXAMPLES = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
INT4 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class Tenant:
    """The fuzzing user: its id, its namespace and the script published there."""

    user: uuid.UUID
    ns: str
    tool: str  # ns/tool_id

    def refs(self) -> list[str]:
        return [self.tool, f"{self.tool}@1.0.0", f"{self.tool}@9.9.9", f"{self.ns}/nope", "hello_world", "public/x"]


_NS = f"fzr_{uuid.uuid4().hex[:10]}"
TENANT = Tenant(uuid.uuid4(), _NS, f"{_NS}/base")


# --- strategies -------------------------------------------------------------------------------

safe_text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=20)
texts = st.one_of(
    st.sampled_from(TENANT.refs()),
    st.sampled_from(["", " ", "1.0.0", "9" * 400, "a" * 10_000, "é" * 300, "%", "*", "'; drop table tools; --"]),
    st.sampled_from(["../x", "ns//t", "A/B", "x@", "@", f"{TENANT.ns}/", "\\", "\u202e", "\ufeff"]),
    safe_text,
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, -1e308, 5e-324, 0.5]),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(safe_text, kids, max_size=3),
    max_leaves=10,
)
deep_json = st.integers(min_value=50, max_value=1500).map(
    lambda depth: json.loads("[" * depth + "]" * depth)
) | st.integers(min_value=50, max_value=1000).map(lambda depth: json.loads('{"a":' * depth + "1" + "}" * depth))
CALL_FIELDS = [
    "tool_id", "server", "session_id", "version", "content_hash", "params_sha256", "params_size", "approval_id",
    "dry_run", "context", "params", "status", "action", "subject", "inputs", "output", "error", "exit_code",
    "duration_ms", "executor_chain", "reason", "ttl_seconds", "pattern", "id", "ref",
]  # fmt: skip
field_values = st.one_of(
    json_values,
    st.sampled_from(["0" * 64, "a" * 64, "A" * 64, "f" * 63, str(uuid.uuid4()), "not-a-uuid", "00000000-0000"]),
    deep_json,
)
call_objects = st.dictionaries(st.sampled_from(CALL_FIELDS) | safe_text, field_values, max_size=6) | json_values
jsonb_args = call_objects | deep_json
uuid_args = st.none() | st.uuids() | st.just(uuid.UUID(int=0))

# Argument strategies by declared type (pg_get_function_identity_arguments' spelling).
BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "text": st.none() | texts,
    "jsonb": st.none() | jsonb_args.map(Jsonb),
    "uuid": uuid_args,
    "boolean": st.none() | st.booleans(),
    "integer": st.none() | st.integers(*INT4) | st.sampled_from([*INT4, 0, -1]),
    "real[]": st.none() | st.lists(st.floats(width=32), max_size=4) | st.just([0.1] * 384),
    "text[]": st.none() | st.lists(st.none() | texts, max_size=4),
}


def without_nul(value: Any) -> Any:
    """`value` with NUL taken out of every string: jsonb cannot hold one, so it never reaches a
    function (the Python side's handling of NUL is tested in tests/test_fuzz.py)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value


def in_namespace(manifest: dict[str, Any]) -> dict[str, Any]:
    """Most generated manifests publish into the tenant's namespace (else they only meet
    "you cannot publish into public")."""
    manifest = without_nul(manifest)
    tool_id = manifest.get("tool_id")
    if isinstance(tool_id, str) and tool_id and "/" not in tool_id:
        return {**manifest, "tool_id": f"{TENANT.ns}/{tool_id}"}
    return manifest


publish_args = st.one_of(
    st.tuples(manifests(safe_text, finite_json).map(in_namespace), files_strategy.map(without_nul)),
    near_valid(finite_json).map(lambda mf: (in_namespace(mf[0]), without_nul(mf[1]))),
    st.tuples(
        st.just({"tool_id": TENANT.tool, "tool_type": "script", "version": "1.0.1"}), files_strategy.map(without_nul)
    ),
).flatmap(
    lambda mf: st.tuples(
        st.just(mf[0]), st.just(mf[1]), st.none() | texts, st.none() | call_objects, st.none() | uuid_args
    )
)


# --- the database -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rpc:
    name: str
    types: list[str]  # every argument's type, in order
    required: int  # how many have no default


def rpcs(conn: psycopg.Connection) -> list[Rpc]:
    rows = conn.execute(
        """select p.proname, coalesce(array(select format_type(t, null) from unnest(p.proargtypes) t), '{}'),
                  p.pronargs - p.pronargdefaults
             from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = 'public' and p.prokind = 'f'
              and has_function_privilege('authenticated', p.oid, 'execute')
            order by 1"""
    ).fetchall()
    return [Rpc(name, list(types), required) for name, types, required in rows]


@pytest.fixture(scope="module")
def admin(database_url: str) -> Iterator[psycopg.Connection]:
    """The superuser, autocommit: it makes the tenant and its script, and deletes them after."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (TENANT.ns, TENANT.user))
        manifest = {
            "tool_id": TENANT.tool,
            "tool_type": "script",
            "executor": "bash_runtime",
            "version": "1.0.0",
            "entrypoint": "run.sh",
            "parameters": [{"name": "word", "type": "string"}],
        }
        files = [{"path": "run.sh", "content_text": "echo $KIWI_PARAM_WORD", "is_entrypoint": True}]
        with conn.transaction():
            act(conn, TENANT.user)
            conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
        try:
            yield conn
        finally:
            conn.execute("delete from approvals where namespace = %s", (TENANT.ns,))
            conn.execute("delete from tools where namespace = %s", (TENANT.ns,))
            conn.execute("delete from namespaces where owner_id = %s", (TENANT.user,))


@pytest.fixture(scope="module")
def granted(admin: psycopg.Connection) -> list[Rpc]:
    found = rpcs(admin)
    assert {"publish_tool_version", "search_tools", "check_call", "decide_approval"} <= {r.name for r in found}
    return found


def act(conn: psycopg.Connection, user: uuid.UUID) -> None:
    """For the rest of this transaction, be `user` as PostgREST makes a request's caller."""
    claims = {"sub": str(user), "role": "authenticated", "aud": "authenticated"}
    conn.execute(
        "select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)",
        (json.dumps(claims),),
    )


def rows_of_tenant(conn: psycopg.Connection) -> tuple[int, ...]:
    """The tenant's tools, versions, files and namespaces (read as the superuser, then the tenant again)."""
    conn.execute("select set_config('role', 'none', true)")
    counts = conn.execute(
        """select (select count(*) from tools where owner_id = %(u)s or namespace = %(ns)s),
                  (select count(*) from tool_versions v join tools t on t.id = v.tool_uuid
                    where t.owner_id = %(u)s or t.namespace = %(ns)s),
                  (select count(*) from tool_version_files f join tool_versions v on v.id = f.version_id
                     join tools t on t.id = v.tool_uuid where t.owner_id = %(u)s or t.namespace = %(ns)s),
                  (select count(*) from namespaces where owner_id = %(u)s),
                  (select count(*) from namespace_members where user_id = %(u)s)""",
        {"u": TENANT.user, "ns": TENANT.ns},
    ).fetchone()
    conn.execute("select set_config('role', 'authenticated', true)")
    return tuple(counts)


def call_as_tenant(conn: psycopg.Connection, sql: str, args: tuple[Any, ...] | dict[str, Any]) -> None:
    """Run `sql` as the tenant in a rolled-back transaction; a refusal must be one Kiwi raises on
    purpose and must leave the tenant's rows as they were."""
    with conn.transaction(force_rollback=True):
        act(conn, TENANT.user)
        before = rows_of_tenant(conn)
        try:
            with conn.transaction():
                conn.execute(sql, args).fetchall()
        except psycopg.Error as e:
            state, message = e.sqlstate, e.diag.message_primary
            event(f"refused {state}")
            assert state in ACCEPTED_SQLSTATES, f"{state}: {e}\ncontext: {e.diag.context}"
            assert message and message.strip(), f"{state} without a message"
            assert "invalid input syntax" not in message, f"{state}: a raw cast error: {e}"
            assert rows_of_tenant(conn) == before, f"refused ({state}: {message}) but the registry changed"
            return
        event("answered")


# --- the tests --------------------------------------------------------------------------------


@EXAMPLES
@given(data=st.data())
def test_any_granted_rpc_with_any_arguments_answers_or_refuses_on_purpose(
    data: st.DataObject, admin: psycopg.Connection, granted: list[Rpc]
) -> None:
    rpc = data.draw(st.sampled_from(granted), label="rpc")
    count = data.draw(st.integers(rpc.required, len(rpc.types)), label="arguments")
    args = tuple(data.draw(BY_TYPE.get(t, st.none()), label=t) for t in rpc.types[:count])
    event(rpc.name)
    placeholders = ", ".join(f"%s::{t}" for t in rpc.types[:count])
    call_as_tenant(admin, f"select public.{rpc.name}({placeholders})", args)


@settings(EXAMPLES, max_examples=200)
@given(args=publish_args)
def test_publish_tool_version_answers_or_refuses_on_purpose(
    args: tuple[Any, ...], admin: psycopg.Connection, granted: list[Rpc]
) -> None:
    manifest, files, manifest_yaml, signature, approval = args
    call_as_tenant(
        admin,
        "select publish_tool_version(%s, %s, %s, %s, %s::uuid)",
        (Jsonb(manifest), Jsonb(files), manifest_yaml, None if signature is None else Jsonb(signature), approval),
    )


gate_rpcs = st.sampled_from(["check_call", "admit_call", "request_approval", "preview_execution_plan"])
gate_calls = st.fixed_dictionaries(
    {"tool_id": st.sampled_from(TENANT.refs()) | texts},
    optional={field: field_values for field in CALL_FIELDS if field != "tool_id"},
)


@settings(EXAMPLES, max_examples=100)
@given(name=gate_rpcs, call=gate_calls | call_objects)
def test_the_gate_and_approval_rpcs_answer_or_refuse_on_purpose(
    name: str, call: Any, admin: psycopg.Connection, granted: list[Rpc]
) -> None:
    if name not in {r.name for r in granted}:
        pytest.skip(f"{name} is not granted to authenticated")
    call_as_tenant(admin, f"select public.{name}(%s)", (Jsonb(call),))


@settings(EXAMPLES, max_examples=80)
@given(
    approval=uuid_args,
    approve=st.none() | st.booleans(),
    tool=st.none() | texts,
    sha=st.none() | st.sampled_from(["0" * 64, "x"]) | texts,
    content_hash=st.none() | texts,
    which=st.sampled_from(["decide", "use"]),
)
def test_deciding_and_using_approvals_answers_or_refuses_on_purpose(
    approval: uuid.UUID | None,
    approve: bool | None,
    tool: str | None,
    sha: str | None,
    content_hash: str | None,
    which: str,
    admin: psycopg.Connection,
) -> None:
    if which == "decide":
        call_as_tenant(admin, "select decide_approval(%s::uuid, %s, %s, %s)", (approval, approve, tool, sha))
    else:
        call_as_tenant(admin, "select use_approval(%s::uuid, %s, %s, %s)", (approval, tool, sha, content_hash))


namespace_names = st.sampled_from(["public", TENANT.ns, "x", "-x", "A", "a" * 63, "a" * 64]) | safe_text
owners = st.sampled_from([TENANT.user, uuid.uuid4(), None])


@settings(EXAMPLES, max_examples=80)
@given(
    statement=st.sampled_from(["create", "describe", "add member", "remove member", "delete"]),
    namespace=namespace_names,
    owner=owners,
    text=st.none() | texts,
    role=st.sampled_from(["owner", "member", "admin", ""]),
)
def test_namespace_writes_answer_or_refuse_on_purpose(
    statement: str,
    namespace: str,
    owner: uuid.UUID | None,
    text: str | None,
    role: str,
    admin: psycopg.Connection,
) -> None:
    """Users make namespaces and members by insert (RLS decides, the triggers keep an owner)."""
    sql = {
        "create": "insert into namespaces (namespace, display_name, description, owner_id) "
        "values (%(ns)s, %(text)s, %(text)s, %(owner)s)",
        "describe": "update namespaces set display_name = %(text)s, description = %(text)s where namespace = %(ns)s",
        "add member": "insert into namespace_members (namespace, user_id, role) values (%(ns)s, %(owner)s, %(role)s)",
        "remove member": "delete from namespace_members where namespace = %(ns)s and user_id = %(owner)s",
        "delete": "delete from namespaces where namespace = %(ns)s",
    }[statement]
    call_as_tenant(admin, sql + " returning 1", {"ns": namespace, "text": text, "owner": owner, "role": role})
