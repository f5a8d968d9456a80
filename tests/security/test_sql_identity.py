"""Every caller acts as itself in SQL (issue 12): no function trusts identity it is handed.

Each test runs in one transaction that is rolled back, on the admin connection, and acts
as PostgREST callers do: `set_config('role', ...)` and `request.jwt.claims` for the
transaction, as anon or as one of two signed-in users with their own uuids and
namespaces. What each test proves is in its docstring.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.test_database_lint import ANON_SECURITY_DEFINER_ALLOWED

SHA = "a" * 64

# Security invoker helpers of kiwi_internal that anon may execute: the invoker RPCs anon
# calls (search_tools, preview_execution_plan, signature_states, resolve_chain_attestations,
# whoami) call them with anon's own rights, so executing one grants nothing anon could not
# do itself; none takes an identity or an admin flag.
ANON_INVOKER_HELPERS = {
    "kiwi_internal.caller_role()": "who is asking, read from the session (whoami)",
    "kiwi_internal.caller_is_admin()": "whether the session is an admin (whoami, can_read)",
    "kiwi_internal.caller_identity()": "the session's user id or role (whoami)",
    "kiwi_internal.can_read(p_visibility text, p_namespace text)": "a tool's readability for the session (preview)",
    "kiwi_internal.normalize_ref(p_ref text)": "public/x is x (signature_states, preview)",
    "kiwi_internal.tool_ref(p_namespace text, p_tool_id text)": "namespace/tool_id as a reference (preview)",
    "kiwi_internal.search_words_of(p_text text)": "splits a query into words (search_tools)",
    "kiwi_internal.search_filter_sql()": "the text of search_tools' modifier filter, a constant (search_tools)",
    "kiwi_internal.search_signed_sql()": "the text of search_tools' outer query, a constant (search_tools)",
    "kiwi_internal.search_weights(OUT words double precision, OUT meaning double precision, "
    "OUT quality double precision, OUT terms double precision, OUT name_field double precision, "
    "OUT tags_field double precision, OUT text_field double precision, OUT parameters_field double precision, "
    "OUT lexical_floor double precision, OUT meaning_floor double precision, OUT per_word double precision, "
    "OUT per_word_fused double precision, OUT length_b double precision, OUT length_k1 double precision, "
    "OUT length_pivot double precision, OUT length_from double precision, OUT length_full double precision, "
    "OUT query_k3 double precision)": ("the weights of search's signals, constants (search_tools)"),
    "kiwi_internal.weighted_tsquery(p_term text, p_weight text)": "a query term's text for one field (search_tools)",
    "kiwi_internal.search_tf_weighted(p_document tsvector, p_parts double precision[], p_lexemes text[], "
    "p_bounds integer[], p_prefixes text[], p_k1 double precision, p_b double precision, p_pivot double precision)": (
        "arithmetic over the tsvector it is given, reads no table (search_tools' term frequency)"
    ),
    "kiwi_internal.nearest_sql(p_model text, p_vector text, p_limit text, p_min text, p_filter text)": (
        "the text of the nearest tools' query, from placeholders (search_tools, nearest_tools)"
    ),
    "kiwi_internal.search_hnsw()": "pgvector's scan settings for the caller's own transaction (search_tools)",
    "kiwi_internal.plan_or_error(p_tool_id text)": (
        "a tool's plan as execution_plan computes it for the caller, or its error (tool_merged_config)"
    ),
    "kiwi_internal.signatures_of(p_version_uuid uuid)": "a version's signatures under the caller's RLS",
    "kiwi_internal.is_semver(p_version text)": "manifest validation (preview)",
    "kiwi_internal.canonical_json(p_value jsonb)": "content hashing (preview)",
    "kiwi_internal.sha256_hex(p_text text)": "content hashing (preview)",
    "kiwi_internal.content_hash(p_manifest jsonb, p_files jsonb)": "content hashing (preview)",
    "kiwi_internal.parameters_schema(p_parameters jsonb)": "a manifest's parameters as JSON Schema (preview)",
    "kiwi_internal.is_safe_path(p_path text)": "file path validation (preview)",
    "kiwi_internal.guess_media_type(p_path text)": "file media types (preview)",
    "kiwi_internal.jsonb_deep_merge(p_base jsonb, p_patch jsonb, p_append jsonb)": "config merging (preview)",
    "kiwi_internal.append_marks(p_schema jsonb, p_marks jsonb)": "the lists a contract marks append-only (preview)",
    "kiwi_internal.chain_error(p_kind text, p_root text, p_path text[], p_next text, p_detail text)": (
        "the wording of chain errors (preview)"
    ),
    "kiwi_internal.manifest_problems(p_manifest jsonb)": "manifest validation (preview)",
    "kiwi_internal.manifest_base_problems(p_manifest jsonb)": "manifest validation (preview)",
    "kiwi_internal.files_problems(p_files jsonb, p_manifest jsonb)": "file validation (preview)",
    "kiwi_internal.string_list_problems(p_value jsonb, p_field text, p_what text, p_pattern text)": (
        "directive validation (preview)"
    ),
    "kiwi_internal.directive_problems(p_manifest jsonb)": "directive validation (preview)",
    "kiwi_internal.directive_coverage_problems(p_manifest jsonb)": "directive validation (preview)",
    "kiwi_internal.patterns_cover(p_patterns jsonb, p_value text)": "directive validation (preview)",
    "kiwi_internal.glob_covers(p_pattern text, p_value text)": "permission globs (preview)",
    "kiwi_internal.planned_files(p_manifest jsonb, p_files jsonb)": "a preview's files, hashed (preview)",
    "kiwi_internal.registry_limit(p_name text)": "a registry limit, from a table everyone reads (preview)",
    "kiwi_internal.registry_limit_json(p_name text, p_default jsonb)": "a registry limit, as above (preview)",
    "kiwi_internal.over_limit(p_field text, p_size bigint, p_unit text, p_name text, p_limit bigint)": (
        "the wording of a refusal over a limit (preview)"
    ),
    "kiwi_internal.manifest_limit_problems(p_manifest jsonb)": "manifest validation against the limits (preview)",
    "kiwi_internal.path_limit_problems(p_field text, p_path text)": "file path validation against the limits (preview)",
    "kiwi_internal.backtracking_construct(p_pattern text)": "a pattern's backtracking constructs (preview)",
    "kiwi_internal.pattern_problem(p_pattern text, p_path text)": "parameter pattern validation (preview)",
    "kiwi_internal.schema_problems(p_schema jsonb, p_path text, p_draft text, p_outputs boolean, p_depth integer)": (
        "parameter and outputs schema validation (preview)"
    ),
    "kiwi_internal.outputs_problems(p_outputs jsonb)": "outputs schema validation (preview)",
    "kiwi_internal.folded_path(p_path text)": "a path under NFC and case folding, for duplicates (preview)",
    "kiwi_internal.is_media_type(p_media_type text)": "file media type validation (preview)",
    "kiwi_internal.max_timeout_s()": "the maximum timeout, a constant (preview)",
    "kiwi_internal.timeout_problems(p_config jsonb, p_path text, p_depth integer)": "config timeouts (preview)",
    "kiwi_internal.version_length_problem(p_version text)": "manifest validation (preview)",
    "kiwi_internal.version_max_chars()": "the longest version, a constant (preview)",
    "kiwi_internal.visibility_rank(p_visibility text)": "the order of visibilities, a pure function (preview)",
    # config contracts (150_config_contracts.sql): pure functions of their arguments,
    # but checked_config, which reads the chain through resolve_chains as the caller sees it
    "kiwi_internal.json_type_words(p_types text[])": "the wording of config problems (preview)",
    "kiwi_internal.json_shown(p_value jsonb)": "the wording of config problems (preview)",
    "kiwi_internal.unknown_key(p_path text, p_key text, p_schema jsonb)": "an unknown config key, named (preview)",
    "kiwi_internal.alias_problems(p_spec jsonb, p_path text, p_depth integer)": "contract validation (preview)",
    "kiwi_internal.contract_problems(p_schema jsonb, p_path text, p_depth integer)": "contract validation (preview)",
    "kiwi_internal.config_problems(p_value jsonb, p_schema jsonb, p_path text)": "config validation (preview)",
    "kiwi_internal.jsonb_put(p_target jsonb, p_path text[], p_value jsonb)": "config normalisation (preview)",
    "kiwi_internal.config_alias(p_target jsonb, p_spec jsonb, p_value jsonb, p_path text)": (
        "config normalisation (preview)"
    ),
    "kiwi_internal.config_spread(p_target jsonb, p_map jsonb, p_value jsonb, p_path text)": (
        "config normalisation (preview)"
    ),
    "kiwi_internal.config_normalise(p_value jsonb, p_schema jsonb, p_path text)": "config normalisation (preview)",
    "kiwi_internal.checked_config(p_manifest jsonb)": "a config against its chain's contract (preview)",
    # a plan's trust (schema files 400_secret_grants.sql to 430_publish_trust.sql and
    # 450_directive_sandbox_coverage.sql): pure functions of their arguments, but executor_plan,
    # which reads a plan through execution_plan as the caller sees it.
    # (trust_problems and sandbox_problems, called only by security definer publish, are
    # revoked: 430_publish_trust.sql.)
    "kiwi_internal.json_list(p_value jsonb)": "a value as a list (preview, directive validation)",
    "kiwi_internal.variable_covered(p_entry text, p_patterns text[])": "variable patterns (preview's plan_trust)",
    "kiwi_internal.config_variable_refs(p_config jsonb)": "the ${VAR}s a config reads (preview's plan_trust)",
    "kiwi_internal.variable_problems(p_config jsonb, p_allowed text[], p_grants text[], p_namespace text)": (
        "a non-admin's ungranted variables, refused (preview); the grants are the caller's to read"
    ),
    "kiwi_internal.refuse_trust(p_problems text[])": "the wording of that refusal (preview)",
    "kiwi_internal.sandbox_limit_keys()": "the sandbox's limits, a constant (preview's plan_trust)",
    "kiwi_internal.sandbox_path_allowed(p_entry text, p_allowed jsonb)": "sandbox narrowing (preview's plan_trust)",
    "kiwi_internal.sandbox_narrowed(p_below jsonb, p_over jsonb)": "sandbox narrowing (preview's plan_trust)",
    "kiwi_internal.sandbox_step(p_below jsonb, p_over jsonb, p_trusted boolean)": (
        "one step of the sandbox up a chain (preview's plan_trust; p_trusted is computed by the caller's"
        " own preview, which only widens for caller_is_admin())"
    ),
    "kiwi_internal.plan_trust_of(p_plan jsonb)": "where a preview's fold starts: its executor's plan (preview)",
    "kiwi_internal.plan_trust(p_below jsonb, p_configs jsonb[], p_trusted boolean[], p_root_grants text[])": (
        "the preview's sandbox and allowed variables; its result is a preview, never a stored plan"
    ),
    "kiwi_internal.sandboxed_config(p_config jsonb, p_trust jsonb)": "the preview's config with its sandbox (preview)",
    "kiwi_internal.executor_plan(p_exec text)": (
        "an executor's plan as the caller sees it (directive_coverage_problems: directive validation, preview)"
    ),
    "kiwi_internal.sandbox_coverage_problems(p_where text, p_ref text, p_permissions jsonb)": (
        "what a required tool's or server's sandbox reaches beyond the permissions (directive validation, preview)"
    ),
}

# Argument names that would carry an identity or an admin flag.
IDENTITY_ARGUMENTS = (
    "p_admin",
    "p_ns ",
    "p_uid",
    "p_user",
    "p_owner",
    "p_caller",
    "p_role",
    "p_identity",
    "p_is_admin",
)

KIWI_INTERNAL_FUNCTIONS = """
    select n.nspname || '.' || p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
           p.prosecdef,
           pg_catalog.has_function_privilege(%s, p.oid, 'EXECUTE')
      from pg_catalog.pg_proc p
      join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'kiwi_internal'
     order by 1
"""


@dataclass(frozen=True)
class World:
    """Two signed-in users, each owning a namespace, and a private tool in the first one's."""

    conn: psycopg.Connection
    a: uuid.UUID
    b: uuid.UUID
    ns_a: str
    ns_b: str
    secret: str  # a word only the private tool carries

    def act(self, role: str, user: uuid.UUID | None = None) -> None:
        """Act as PostgREST would for this transaction: the role, and the JWT claims."""
        claims: dict[str, Any] = {"role": role} | ({"sub": str(user)} if user else {})
        self.conn.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', %s, true)",
            (json.dumps(claims), role),
        )

    def admin(self) -> None:
        self.conn.execute("select set_config('role', 'none', true), set_config('request.jwt.claims', '', true)")

    def one(self, sql: str, params: Any = None) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return row[0] if row else None

    def error(self, sql: str, params: Any = None) -> psycopg.Error:
        """The error `sql` raises; the transaction goes on (a savepoint is rolled back)."""
        with pytest.raises(psycopg.Error) as raised, self.conn.transaction():
            self.conn.execute(sql, params)
        return raised.value


def _word(n: int = 9) -> str:
    return "".join(random.choice(string.ascii_lowercase) for _ in range(n))


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction(force_rollback=True):
        suffix = uuid.uuid4().hex[:8]
        w = World(conn, uuid.uuid4(), uuid.uuid4(), f"sec_a_{suffix}", f"sec_b_{suffix}", "qz" + _word())
        conn.execute(
            "insert into namespaces (namespace, owner_id) values (%s, %s), (%s, %s)", (w.ns_a, w.a, w.ns_b, w.b)
        )
        w.act("authenticated", w.a)
        conn.execute(
            "select publish_tool_version(%s, %s)",
            (
                Jsonb(
                    {
                        "tool_id": f"{w.ns_a}/{w.secret}_vault",
                        "tool_type": "script",
                        "executor": "bash_runtime",
                        "version": "1.0.0",
                        "visibility": "private",
                        "tags": [w.secret + "tag"],
                    }
                ),
                Jsonb([{"path": "a.sh", "content_text": "echo secret"}]),
            ),
        )
        conn.execute(
            "select publish_tool_version(%s, %s)",
            (
                Jsonb(
                    {
                        "tool_id": f"{w.ns_a}/open_tool",
                        "tool_type": "script",
                        "executor": "bash_runtime",
                        "version": "1.0.0",
                        "visibility": "public",
                    }
                ),
                Jsonb([{"path": "a.sh", "content_text": "echo open"}]),
            ),
        )
        w.admin()
        yield w


# -- kiwi_internal is not anon's ---------------------------------------------------------


def test_anon_executes_no_kiwi_internal_function_but_the_documented_ones(world: World) -> None:
    """Every kiwi_internal function, from pg_proc: anon holds EXECUTE on none but the
    allow-listed security definer entry points (which check the caller themselves) and the
    allow-listed security invoker helpers (which run with anon's own rights); and none that
    anon or authenticated may execute takes an identity or admin flag as an argument."""
    rows = world.conn.execute(KIWI_INTERNAL_FUNCTIONS, ("anon",)).fetchall()
    assert len(rows) > 40, "kiwi_internal's functions were not found"
    offenders = [
        f"{name} ({'security definer' if definer else 'invoker'})"
        for name, definer, executable in rows
        if executable
        and not (definer and name in ANON_SECURITY_DEFINER_ALLOWED)
        and not (not definer and name in ANON_INVOKER_HELPERS)
    ]
    assert not offenders, "anon may execute kiwi_internal functions nobody vouched for:\n  " + "\n  ".join(offenders)
    stale = sorted(set(ANON_INVOKER_HELPERS) - {name for name, definer, executable in rows if executable})
    assert not stale, f"allow-listed helpers anon can no longer execute (remove them): {stale}"
    for role in ("anon", "authenticated"):
        trusting = [
            name
            for name, _definer, executable in world.conn.execute(KIWI_INTERNAL_FUNCTIONS, (role,)).fetchall()
            if executable and any(arg in name.replace(",", " ,").replace(")", " )") for arg in IDENTITY_ARGUMENTS)
        ]
        assert not trusting, f"{role} may execute functions that take an identity or admin flag: {trusting}"


@pytest.mark.parametrize(
    ("sql", "function"),
    [
        ("select kiwi_internal.compute_plan((select id from tool_versions limit 1), true, '{}')", "compute_plan"),
        ("select kiwi_internal.rate_limit_check('word_count', null, null, null)", "rate_limit_check"),
        ("select kiwi_internal.bucket_owner()", "bucket_owner"),
        (
            "select kiwi_internal.refuse_command_write('publish', 'x', 'public', 'runtime', false, false)",
            "refuse_command_write",
        ),
        ("select kiwi_internal.spend_approval(gen_random_uuid(), 'x', 'y', null)", "spend_approval"),
        ("select kiwi_internal.readable_tool('hello_world')", "readable_tool"),
        ("select kiwi_internal.refresh_latest(gen_random_uuid())", "refresh_latest"),
        ("select kiwi_internal.rebuild_plans()", "rebuild_plans"),
        ("select kiwi_internal.remember_search_words('hijacked words')", "remember_search_words"),
        ("select kiwi_internal.set_version_status('hello_world', '1.0.0', 'yank', null)", "set_version_status"),
        ("select kiwi_internal.delete_tool('hello_world')", "delete_tool"),
        ("select kiwi_internal.request_approval('{}')", "request_approval"),
    ],
)
def test_anon_cannot_call_kiwi_internal_functions_that_trust_their_arguments_or_write(
    world: World, sql: str, function: str
) -> None:
    """Calling them as anon is refused by the database itself (42501, permission denied),
    before any of their code runs: compute_plan(p_admin => true) reveals nothing."""
    world.act("anon")
    err = world.error(sql)
    assert err.sqlstate == "42501", err
    assert f"permission denied for function {function}" in str(err)


def test_signed_in_users_cannot_call_compute_plan_with_an_admin_flag(world: World) -> None:
    """The finding as reported: kiwi_internal.compute_plan(uuid, p_admin, p_ns) trusted its
    caller's admin flag; no API role may execute it now."""
    for role, user in (("authenticated", world.b), ("service_role", None)):
        world.act(role, user)
        err = world.error(
            "select kiwi_internal.compute_plan(v.id, true, '{}')"
            " from tool_versions v join tools t on t.id = v.tool_uuid"
            " where t.ref = %s",
            (f"{world.ns_a}/{world.secret}_vault",),
        )
        assert err.sqlstate == "42501", (role, err)


def test_open_context_does_not_trust_a_version_id_it_is_handed(world: World) -> None:
    """kiwi_internal.open_context took the directive version public.open_context had found
    under the caller's RLS, but anyone signed in can call it with any id: a stranger handing
    it the id of another namespace's private directive learnt its name and permissions. It
    now checks that the caller may read that directive."""
    world.act("authenticated", world.a)
    world.one(
        "select publish_tool_version(%s, %s)",
        (
            Jsonb(
                {
                    "tool_id": f"{world.ns_a}/{world.secret}_plan",
                    "tool_type": "directive",
                    "executor": "directive_runtime",
                    "version": "1.0.0",
                    "visibility": "private",
                    "entrypoint": "d.md",
                    "permissions": {"fs_write": [f"{world.secret}/**"]},
                }
            ),
            Jsonb([{"path": "d.md", "content_text": "# private plan"}]),
        ),
    )
    world.admin()
    version_id = world.one(
        "select v.id from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s",
        (f"{world.ns_a}/{world.secret}_plan",),
    )
    world.act("authenticated", world.b)
    err = world.error("select kiwi_internal.open_context('s', %s, null, null)", (version_id,))
    assert err.sqlstate == "PT404" and world.secret not in str(err), err
    world.act("authenticated", world.a)
    opened = world.one("select kiwi_internal.open_context('s', %s, null, null)", (version_id,))
    assert opened["directive"] == f"{world.ns_a}/{world.secret}_plan@1.0.0"


# -- rate limits ---------------------------------------------------------------------------


def test_anon_cannot_drain_a_signed_in_users_bucket(world: World) -> None:
    """The 12-call word_count scenario: with a limit of 12 calls an hour, anonymous calls,
    through take_rate_limit or the gate, use up only anon's own bucket; a signed-in user
    still calls word_count. And one signed-in user cannot drain another's own bucket."""
    world.conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'word_count', 12, 3593)"
    )
    world.act("anon")
    taken = [world.one("select (take_rate_limit('word_count') ->> 'allowed')::boolean") for _ in range(13)]
    assert taken == [True] * 12 + [False]
    gate = world.one("select check_call(%s)", (Jsonb({"tool_id": "word_count", "params_sha256": SHA}),))
    assert gate["allowed"] is False and gate["kind"] == "rate_limited" and gate["retry_after_s"] > 0, gate

    world.act("authenticated", world.a)
    assert world.one("select check_call(%s)", (Jsonb({"tool_id": "word_count", "params_sha256": SHA}),))["allowed"]
    assert world.one("select (take_rate_limit('word_count') ->> 'allowed')::boolean")

    world.act("authenticated", world.b)
    taken_by_b = [world.one("select (take_rate_limit('word_count') ->> 'allowed')::boolean") for _ in range(12)]
    assert taken_by_b == [True] * 12
    world.act("authenticated", world.a)
    assert world.one("select (take_rate_limit('word_count') ->> 'allowed')::boolean"), "b drained a's own bucket"

    world.admin()
    counters = dict(
        world.conn.execute(
            "select c.subject, c.calls from kiwi_internal.rate_limit_counters c join rate_limits l on l.id = c.limit_id"
            " where l.key = 'word_count' and l.per_seconds = 3593"
        ).fetchall()
    )
    assert counters == {
        "role:anon word_count": 12,
        "word_count": 1,
        f"{world.a} word_count": 2,
        f"{world.b} word_count": 12,
    }


# -- search ----------------------------------------------------------------------------------


def test_similar_search_words_leaks_nothing_private(world: World) -> None:
    """The vocabulary holds the words of private tools too; typo tolerance offers one only to
    those who may list a tool carrying it: not to anon, not to another signed-in user."""
    typo = world.secret[:4] + world.secret[5:]  # one letter dropped
    for role, user in (("anon", None), ("authenticated", world.b)):
        world.act(role, user)
        assert world.one("select kiwi_internal.similar_search_words(%s)", (typo,)) == [], role
        assert world.one("select kiwi_internal.similar_search_words(%s)", (typo + "tag",)) == [], role
        assert world.one("select count(*) from search_tools(%s)", (typo,)) == 0, role
    world.act("authenticated", world.a)
    assert world.secret in world.one("select kiwi_internal.similar_search_words(%s)", (typo,))
    assert world.one("select tool_id from search_tools(%s) limit 1", (typo,)) == f"{world.ns_a}/{world.secret}_vault"


# -- approvals ---------------------------------------------------------------------------------


def test_approvals_cannot_be_filed_into_another_namespaces_queue(world: World) -> None:
    """b cannot request an approval of a's private tool, nor of a made-up tool of any
    namespace: "not found", the same words either way, through request_approval and the
    gate. An approval records the tool's real namespace."""
    world.conn.execute(
        "insert into approval_policies (pattern, ttl_seconds) values (%s, 600), ('sec_victim_*', 600)",
        (f"{world.ns_a}/*",),
    )
    private = f"{world.ns_a}/{world.secret}_vault"
    world.act("authenticated", world.b)
    for tool in (private, f"{world.ns_a}/no_such_tool", "sec_victim_ns/anything"):
        for sql in ("select request_approval(%s)", "select check_call(%s)"):
            err = world.error(sql, (Jsonb({"tool_id": tool, "params_sha256": SHA}),))
            assert (err.sqlstate, str(err).splitlines()[0]) == ("PT404", f'tool "{tool}" not found'), (sql, err)
    assert (
        world.one(
            "select request_approval(%s) ->> 'namespace'",
            (Jsonb({"tool_id": f"{world.ns_a}/open_tool", "params_sha256": SHA}),),
        )
        == world.ns_a
    )
    err = world.error("select request_approval(%s)", (Jsonb({"tool_id": "hello_world", "params_sha256": SHA}),))
    assert err.sqlstate == "PT409" and "no approval policy covers it" in str(err)
    world.admin()
    queues = world.conn.execute("select namespace, tool_id from approvals where requested_by = %s", (str(world.b),))
    assert queues.fetchall() == [(world.ns_a, f"{world.ns_a}/open_tool")]


# -- user ids ------------------------------------------------------------------------------------


USER_ID_COLUMNS = [
    ("namespaces", "owner_id"),
    ("namespace_members", "user_id"),
    ("tools", "owner_id"),
    ("tool_versions", "published_by"),
    ("tool_version_signatures", "signed_by"),
    ("tool_runs", "caller"),
    ("audit_log", "caller"),
    ("execution_contexts", "caller"),
    ("approvals", "requested_by"),
    ("approvals", "decided_by"),
]
# uuid columns anon may read: row ids, never users
ROW_ID_COLUMNS = {
    ("tools", "id"),
    ("tool_versions", "id"),
    ("tool_versions", "tool_uuid"),
    ("tool_version_files", "version_id"),
    ("tool_version_signatures", "id"),
    ("tool_version_signatures", "version_id"),
}


def test_anon_cannot_read_user_ids(world: World) -> None:
    """No column naming a user is readable by anon, and no uuid column anon reads is one; a
    signed-in user's id appears nowhere in what anon's reads and RPCs return."""
    world.admin()
    for table, column in USER_ID_COLUMNS:
        assert not world.one("select has_column_privilege('anon', %s, %s, 'SELECT')", (f"public.{table}", column)), (
            table,
            column,
        )
    readable = world.conn.execute(
        """select c.relname, a.attname from pg_attribute a join pg_class c on c.oid = a.attrelid
            where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'v') and a.attnum > 0
              and not a.attisdropped and a.atttypid = 'uuid'::regtype
              and has_column_privilege('anon', c.oid, a.attnum, 'SELECT')"""
    ).fetchall()
    assert set(readable) <= ROW_ID_COLUMNS, set(readable) - ROW_ID_COLUMNS

    world.act("anon")
    for table, column in (("namespaces", "owner_id"), ("tools", "owner_id"), ("tool_versions", "published_by")):
        assert world.error(f"select {column} from {table}").sqlstate == "42501"
    tool = f"{world.ns_a}/open_tool"
    seen = json.dumps(
        [
            world.conn.execute("select * from search_tools('open_tool')").fetchall(),
            world.one("select resolve_execution_plan(%s)", (tool,)),
            world.one("select tool_version_source(%s)", (tool,)),
            world.conn.execute("select * from resolve_chain_attestations(%s)", (tool,)).fetchall(),
            world.conn.execute("select * from tool_catalog where tool_id = %s", (tool,)).fetchall(),
            world.conn.execute("select * from tool_version_history where tool_id = %s", (tool,)).fetchall(),
            world.conn.execute("select namespace, display_name, description from namespaces").fetchall(),
            world.one("select whoami()"),
        ],
        default=str,
    )
    assert tool in seen and str(world.a) not in seen


# -- writes that choose a command ----------------------------------------------------------------


def test_a_non_admin_cannot_hijack_a_runtime_or_write_into_public(world: World) -> None:
    """HIJACKED: a signed-in user (even one added to the public namespace) publishing
    bash_runtime 1.0.99 whose command is `bash -c "echo HIJACKED"` is refused, naming why and
    how to get it done, and the registry is unchanged: no version, the same plan for every
    Bash tool. Nor may they yank, deprecate or delete a runtime, primitive or public tool, or
    publish a runtime, primitive, mcp_server, builtin or official tool in their own namespace."""
    world.conn.execute("insert into namespace_members (namespace, user_id) values ('public', %s)", (world.a,))
    before = world.conn.execute(
        "select latest_version, (select count(*) from tool_versions v where v.tool_uuid = t.id),"
        " resolve_execution_plan('hello_world') -> 'config' from tools t where ref = 'bash_runtime'"
    ).fetchone()
    world.act("authenticated", world.a)
    hijack = {
        "tool_id": "bash_runtime",
        "tool_type": "runtime",
        "executor": "subprocess",
        "version": "1.0.99",
        "config": {"command": "bash", "args": ["-c", "echo HIJACKED", "{entrypoint}"]},
    }
    err = world.error("select publish_tool_version(%s)", (Jsonb(hijack),))
    assert err.sqlstate == "42501"
    assert str(err).startswith('only an admin may publish tool "bash_runtime": it is a runtime'), err
    assert err.diag.message_hint == (
        "an admin publishes it (kiwi --admin publish ...), or an admin approves this content for you"
        " (kiwi publish ... --request-approval)"
    )
    refusals = {
        "select yank_tool_version('bash_runtime', '1.0.0')": "only an admin may yank tool",
        "select deprecate_tool_version('subprocess', '1.0.0')": "only an admin may deprecate tool",
        "select delete_tool('hello_world')": "only an admin may delete tool",
        "select unyank_tool_version('bash_runtime', '1.0.0')": "only an admin may unyank tool",
    }
    for sql, message in refusals.items():
        err = world.error(sql)
        assert err.sqlstate == "42501" and message in str(err), (sql, err)
    for manifest in (
        {"tool_type": "runtime", "executor": "subprocess"},
        {"tool_type": "primitive"},
        {"tool_type": "mcp_server", "executor": "subprocess"},
        {"tool_type": "knowledge", "is_builtin": True},
        {"tool_type": "knowledge", "is_official": True},
    ):
        err = world.error(
            "select publish_tool_version(%s)",
            (Jsonb({"tool_id": f"{world.ns_a}/mine", "version": "1.0.0", **manifest}),),
        )
        assert err.sqlstate == "42501" and "only an admin may publish" in str(err), (manifest, err)
    world.admin()
    after = world.conn.execute(
        "select latest_version, (select count(*) from tool_versions v where v.tool_uuid = t.id),"
        " resolve_execution_plan('hello_world') -> 'config' from tools t where ref = 'bash_runtime'"
    ).fetchone()
    assert after == before
    assert "HIJACKED" not in json.dumps(after)
    assert world.one("select count(*) from tools where ref = %s", (f"{world.ns_a}/mine",)) == 0


def test_an_admin_runtime_in_a_users_namespace_stays_the_admins(world: World) -> None:
    """An admin may publish a runtime into a user's namespace; its owner can then neither
    publish a new version of it nor yank or delete it. The admin's next version lists the
    tools that run on it."""
    world.act("service_role")
    world.one(
        "select publish_tool_version(%s)",
        (Jsonb({"tool_id": f"{world.ns_a}/rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}),),
    )
    world.act("authenticated", world.a)
    world.one(
        "select publish_tool_version(%s, %s)",
        (
            Jsonb(
                {
                    "tool_id": f"{world.ns_a}/on_rt",
                    "tool_type": "script",
                    "executor": f"{world.ns_a}/rt",
                    "version": "1.0.0",
                }
            ),
            Jsonb([{"path": "a.sh", "content_text": "echo"}]),
        ),
    )
    for sql in (
        "select publish_tool_version(%s)",
        "select yank_tool_version(%s ->> 'tool_id', '1.0.0')",
        "select delete_tool(%s ->> 'tool_id')",
    ):
        err = world.error(
            sql,
            (
                Jsonb(
                    {
                        "tool_id": f"{world.ns_a}/rt",
                        "tool_type": "runtime",
                        "executor": "subprocess",
                        "version": "1.1.0",
                    }
                ),
            ),
        )
        assert err.sqlstate == "42501", (sql, err)
    world.act("service_role")
    out = world.one(
        "select publish_tool_version(%s)",
        (Jsonb({"tool_id": f"{world.ns_a}/rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.1.0"}),),
    )
    assert (out["dependents"], out["dependents_count"]) == ([f"{world.ns_a}/on_rt"], 1)


# -- directives ------------------------------------------------------------------------------------


def test_a_directive_with_uncovered_tools_is_refused_naming_each(world: World) -> None:
    """A directive that needs github_mcp.delete_repository (and a registry tool) but permits
    only filesystem_mcp.read_file is refused at publish (22023), naming each uncovered tool;
    nothing is published."""
    world.act("authenticated", world.a)
    directive = {
        "tool_id": f"{world.ns_a}/sneaky",
        "tool_type": "directive",
        "executor": "directive_runtime",
        "version": "1.0.0",
        "entrypoint": "d.md",
        "requires": {
            "tools": ["bash_runtime"],
            "mcp": [{"server": "github_mcp", "tools": ["create_issue", "delete_repository"]}],
        },
        "permissions": {"mcp": ["filesystem_mcp.read_file", "github_mcp.create_issue"], "tools": ["kiwi_*"]},
    }
    err = world.error(
        "select publish_tool_version(%s, %s)", (Jsonb(directive), Jsonb([{"path": "d.md", "content_text": "# do"}]))
    )
    assert err.sqlstate == "22023"
    problems = json.loads(err.diag.message_detail or "[]")
    assert problems == [
        'requires.tools[1].id: bash_runtime is not covered by permissions.tools ["kiwi_*"]',
        "requires.mcp[1].tools[2]: github_mcp.delete_repository is not covered by permissions.mcp "
        '["filesystem_mcp.read_file", "github_mcp.create_issue"]',
    ]
    world.admin()
    assert world.one("select count(*) from tools where ref = %s", (directive["tool_id"],)) == 0
