"""The schema stays clean under the Supabase database linter (splinter).

Splinter (github.com/supabase/splinter) is one SQL query per lint, run by the dashboard's
Security and Performance Advisors. Each test below implements one of those lints as our
own catalog query, scoped to the schemas our migrations own, and asserts that it finds
no offender; the failure message lists every offender. The lint each test mirrors is
named in its docstring as NNNN_lint_name. Where a rule here is stricter than splinter's
the docstring says so: passing it still means splinter has nothing to report.

Scope: the `public` and `kiwi_internal` schemas; `auth` only where splinter looks at it
(0002, 0021). Objects that belong to an extension (pg_depend deptype 'e') are ignored.
The schemas exposed over the Data API are read from supabase/config.toml ([api] schemas),
as splinter reads them from PostgREST's `pgrst.db_schemas`.

Every query runs in a transaction that is rolled back, under `search_path = ''`, so
that policy expressions deparse with schema-qualified names (auth.uid(), not uid()).
The queries avoid a literal percent sign: psycopg would read it as a placeholder.
"""

from __future__ import annotations

import tomllib
from typing import Any

import psycopg

from tests.conftest import ROOT

SCHEMAS = ["public", "kiwi_internal"]
EXPOSED_SCHEMAS = tomllib.loads((ROOT / "supabase" / "config.toml").read_text())["api"]["schemas"]
API_ROLES = ["anon", "authenticated"]
REGISTRY_TABLES = [
    "tools",
    "tool_versions",
    "tool_version_files",
    "tool_runs",
    "audit_log",
    "rate_limits",
    "registry_limits",
    "registry_quotas",
    "execution_contexts",
    "approval_policies",
    "approvals",
]


def lint(conn: psycopg.Connection, query: str, **params: Any) -> list[str]:
    """Run a lint query (one text column, one row per offender) and return its rows."""
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute("set local search_path = ''")
        defaults = {
            "schemas": SCHEMAS,
            "exposed": EXPOSED_SCHEMAS,
            "all_schemas": sorted({*SCHEMAS, *EXPOSED_SCHEMAS}),
        }
        cur.execute(query, {**defaults, **params})
        return [row[0] for row in cur.fetchall()]


def report(rule: str, offenders: list[str]) -> str:
    return f"{rule} ({len(offenders)} offender(s)):\n  " + "\n  ".join(offenders)


def not_in_extension(catalog: str, oid: str) -> str:
    """SQL: the object is not a member of an extension."""
    return (
        f"not exists (select from pg_catalog.pg_depend dep where dep.classid = '{catalog}'::regclass"
        f" and dep.objid = {oid} and dep.deptype = 'e')"
    )


def selectable_by_api_roles(oid: str) -> str:
    return (
        f"(pg_catalog.has_table_privilege('anon', {oid}, 'SELECT')"
        f" or pg_catalog.has_table_privilege('authenticated', {oid}, 'SELECT'))"
    )


# Policies with their expressions deparsed, shared by the policy lints.
POLICIES = f"""
    select c.oid as table_oid, c.oid::regclass::text as table_name, c.relrowsecurity,
           p.polname, p.polpermissive, p.polroles,
           case p.polcmd when 'r' then 'SELECT' when 'a' then 'INSERT' when 'w' then 'UPDATE'
                         when 'd' then 'DELETE' else 'ALL' end as command,
           pg_catalog.pg_get_expr(p.polqual, p.polrelid) as using_expr,
           pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) as check_expr
      from pg_catalog.pg_policy p
      join pg_catalog.pg_class c on c.oid = p.polrelid
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where n.nspname::text = any(%(schemas)s)
       and {not_in_extension("pg_class", "c.oid")}
"""


# -- Performance ---------------------------------------------------------------------


def test_every_foreign_key_has_an_index_starting_with_its_columns(conn: psycopg.Connection) -> None:
    """0001_unindexed_foreign_keys: a valid index whose leading columns are the foreign
    key's, in order. Stricter than splinter: a partial index does not count."""
    offenders = lint(
        conn,
        f"""
        select con.conrelid::regclass::text || ': foreign key ' || quote_ident(con.conname) || ' ('
               || (select string_agg(quote_ident(a.attname), ', ' order by k.ord)
                     from unnest(con.conkey) with ordinality as k(attnum, ord)
                     join pg_catalog.pg_attribute a
                       on a.attrelid = con.conrelid and a.attnum = k.attnum)
               || ') has no index starting with its columns'
          from pg_catalog.pg_constraint con
          join pg_catalog.pg_class c on c.oid = con.conrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where con.contype = 'f'
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and not exists (
                 select from pg_catalog.pg_index i
                  where i.indrelid = con.conrelid
                    and i.indisvalid
                    and i.indpred is null
                    and (string_to_array(i.indkey::text, ' ')::int2[])[1:cardinality(con.conkey)]
                        = con.conkey)
         order by 1
        """,
    )
    assert not offenders, report("unindexed foreign keys", offenders)


def test_every_policy_wraps_auth_functions_and_current_setting_in_a_select(
    conn: psycopg.Connection,
) -> None:
    """0003_auth_rls_initplan: auth.uid(), auth.jwt(), auth.role(), auth.email() and
    current_setting() in a policy are called as `(select auth.uid())`, so they run once
    per query (an initplan) rather than once per row. Stricter than splinter, which is
    satisfied when one call is wrapped: here every call must be, and policies are
    checked whether or not RLS is enabled yet."""
    offenders = lint(
        conn,
        f"""
        with policies as ({POLICIES})
        select p.table_name || ': policy ' || quote_ident(p.polname) || ' calls in its '
               || e.clause || ' clause, per row: ' || e.expr
          from policies p
         cross join lateral (values ('USING', p.using_expr), ('WITH CHECK', p.check_expr))
               as e(clause, expr)
         where regexp_count(e.expr, %(call)s, 1, 'i') > regexp_count(e.expr, %(wrapped)s, 1, 'i')
         order by 1
        """,
        call=r"\m(pg_catalog\.)?(auth\.(uid|jwt|role|email)|current_setting)\s*\(",
        wrapped=r"\mselect\s+(pg_catalog\.)?(auth\.(uid|jwt|role|email)|current_setting)\s*\(",
    )
    assert not offenders, report("auth functions re-evaluated per row", offenders)


def test_no_table_has_two_permissive_policies_for_the_same_role_and_action(
    conn: psycopg.Connection,
) -> None:
    """0006_multiple_permissive_policies: a policy FOR ALL counts for each action, one TO
    PUBLIC for every role; roles that bypass RLS and pg_* roles are not counted."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': role ' || quote_ident(r.rolname) || ' has '
               || count(*) || ' permissive ' || act.cmd || ' policies: '
               || string_agg(quote_ident(p.polname), ', ' order by p.polname)
          from pg_catalog.pg_policy p
          join pg_catalog.pg_class c on c.oid = p.polrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
          join pg_catalog.pg_roles r
            on p.polroles @> array[r.oid] or p.polroles = array[0::oid]
         cross join lateral unnest(case p.polcmd
                                     when 'r' then array['SELECT']
                                     when 'a' then array['INSERT']
                                     when 'w' then array['UPDATE']
                                     when 'd' then array['DELETE']
                                     else array['SELECT', 'INSERT', 'UPDATE', 'DELETE']
                                   end) as act(cmd)
         where p.polpermissive
           and c.relkind in ('r', 'p')
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and r.rolname !~ '^pg_'
           and r.rolname !~ '^supabase.*admin$'
           and not r.rolbypassrls
         group by c.oid, r.rolname, act.cmd
        having count(*) > 1
         order by 1
        """,
    )
    assert not offenders, report("multiple permissive policies", offenders)


def test_no_two_indexes_on_a_table_are_identical(conn: psycopg.Connection) -> None:
    """0009_duplicate_index: same access method, columns or expressions, operator
    classes, collations, options, predicate and uniqueness."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': identical indexes '
               || string_agg(quote_ident(ic.relname), ', ' order by ic.relname)
          from pg_catalog.pg_index i
          join pg_catalog.pg_class ic on ic.oid = i.indexrelid
          join pg_catalog.pg_class c on c.oid = i.indrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind in ('r', 'm', 'p')
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
         group by c.oid, ic.relam, i.indisunique, i.indnullsnotdistinct,
                  i.indkey::text, i.indclass::text, i.indcollation::text, i.indoption::text,
                  pg_catalog.pg_get_expr(i.indexprs, i.indrelid),
                  pg_catalog.pg_get_expr(i.indpred, i.indrelid)
        having count(*) > 1
         order by 1
        """,
    )
    assert not offenders, report("duplicate indexes", offenders)


def test_every_table_has_a_primary_key(conn: psycopg.Connection) -> None:
    """0004_no_primary_key."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': no primary key'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind in ('r', 'p')
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and not exists (select from pg_catalog.pg_index i
                            where i.indrelid = c.oid and i.indisprimary)
         order by 1
        """,
    )
    assert not offenders, report("tables without a primary key", offenders)


def test_every_index_is_valid(conn: psycopg.Connection) -> None:
    """0030_invalid_index: no index left invalid by a failed CREATE INDEX CONCURRENTLY."""
    offenders = lint(
        conn,
        f"""
        select i.indexrelid::regclass::text || ' on ' || i.indrelid::regclass::text
               || ': invalid, never used by the planner'
          from pg_catalog.pg_index i
          join pg_catalog.pg_class c on c.oid = i.indrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where not i.indisvalid
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "i.indexrelid")}
         order by 1
        """,
    )
    assert not offenders, report("invalid indexes", offenders)


def test_no_table_turns_autovacuum_off(conn: psycopg.Connection) -> None:
    """0030_autovacuum_disabled: no autovacuum_enabled=false storage parameter."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': ' || o.opt
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         cross join lateral unnest(c.reloptions) as o(opt)
         where c.relkind in ('r', 'm', 'p')
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and lower(o.opt) ~ '^(toast\\.)?autovacuum_enabled=(false|off|no|0)$'
         order by 1
        """,
    )
    assert not offenders, report("autovacuum disabled", offenders)


# -- Row level security --------------------------------------------------------------


def test_every_table_in_an_exposed_schema_has_rls_enabled(conn: psycopg.Connection) -> None:
    """0013_rls_disabled_in_public: every table in an exposed schema (public). Stricter
    than splinter: whatever its grants, and also any kiwi_internal table that anon or
    authenticated hold a privilege on."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': row level security is disabled'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind in ('r', 'p')
           and not c.relrowsecurity
           and {not_in_extension("pg_class", "c.oid")}
           and (n.nspname::text = any(%(exposed)s)
                or (n.nspname::text = any(%(schemas)s)
                    and (pg_catalog.has_table_privilege('anon', c.oid,
                                                        'SELECT, INSERT, UPDATE, DELETE')
                         or pg_catalog.has_table_privilege('authenticated', c.oid,
                                                           'SELECT, INSERT, UPDATE, DELETE'))))
         order by 1
        """,
    )
    assert not offenders, report("RLS disabled on API tables", offenders)


def test_no_table_has_policies_while_rls_is_disabled(conn: psycopg.Connection) -> None:
    """0007_policy_exists_rls_disabled: policies that are never applied."""
    offenders = lint(
        conn,
        f"""
        with policies as ({POLICIES})
        select table_name || ': RLS is disabled, so its policies do nothing: '
               || string_agg(quote_ident(polname), ', ' order by polname)
          from policies
         where not relrowsecurity
         group by table_name
         order by 1
        """,
    )
    assert not offenders, report("policies on tables without RLS", offenders)


def test_every_table_with_rls_enabled_has_a_policy(conn: psycopg.Connection) -> None:
    """0008_rls_enabled_no_policy: RLS without a policy hides every row from everyone
    but the owner and roles that bypass RLS."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': RLS is enabled but no policy exists'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind in ('r', 'p')
           and c.relrowsecurity
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and not exists (select from pg_catalog.pg_policy p where p.polrelid = c.oid)
         order by 1
        """,
    )
    assert not offenders, report("RLS enabled without a policy", offenders)


def test_no_policy_trusts_user_metadata(conn: psycopg.Connection) -> None:
    """0015_rls_references_user_metadata: user_metadata in the JWT is written by the
    user, so it must not decide access."""
    offenders = lint(
        conn,
        f"""
        with policies as ({POLICIES})
        select p.table_name || ': policy ' || quote_ident(p.polname) || ' reads user_metadata in its '
               || e.clause || ' clause: ' || e.expr
          from policies p
         cross join lateral (values ('USING', p.using_expr), ('WITH CHECK', p.check_expr))
               as e(clause, expr)
         where e.expr ~ %(jwt)s or e.expr ~ %(claims)s
         order by 1
        """,
        jwt=r"auth\.jwt\(\).*user_metadata",
        claims=r"current_setting\(.*request\.jwt\.claims.*user_metadata",
    )
    assert not offenders, report("policies reading user_metadata", offenders)


def test_no_write_policy_for_api_roles_is_always_true(conn: psycopg.Connection) -> None:
    """0024_rls_policy_always_true: a permissive policy for PUBLIC, anon or authenticated
    whose USING (UPDATE, DELETE, ALL) or WITH CHECK (INSERT, UPDATE, ALL) is `true`,
    `1=1` or absent. SELECT ... USING (true) is allowed, as in splinter: it is how a
    table is made publicly readable."""
    offenders = lint(
        conn,
        f"""
        with policies as ({POLICIES}),
        checked as (
          select p.*,
                 regexp_replace(lower(coalesce(p.using_expr, '')), '\\s', '', 'g') as using_norm,
                 regexp_replace(lower(coalesce(p.check_expr, '')), '\\s', '', 'g') as check_norm
            from policies p
           where p.polpermissive
             and exists (select from unnest(p.polroles) as r(oid)
                          where r.oid = 0
                             or r.oid in (select oid from pg_catalog.pg_roles
                                           where rolname in ('anon', 'authenticated')))
        )
        select table_name || ': ' || command || ' policy ' || quote_ident(polname)
               || ' lets every row through (USING ' || coalesce(using_expr, 'absent')
               || ', WITH CHECK ' || coalesce(check_expr, 'absent') || ')'
          from checked
         where (command in ('UPDATE', 'DELETE', 'ALL')
                and (using_norm in ('true', '(true)', '1=1', '(1=1)') or using_expr is null))
            or check_norm in ('true', '(true)', '1=1', '(1=1)')
            or (check_expr is null and command in ('INSERT', 'UPDATE', 'ALL'))
         order by 1
        """,
    )
    assert not offenders, report("write policies that are always true", offenders)


# -- What the Data API exposes -------------------------------------------------------


def test_every_view_in_an_exposed_schema_is_security_invoker(conn: psycopg.Connection) -> None:
    """0010_security_definer_view: a view without security_invoker applies its owner's
    rights and RLS, not the reader's. Stricter than splinter: every view in an exposed
    schema whatever its grants, and kiwi_internal views anon or authenticated can read."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': runs with its owner''s rights (set security_invoker)'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind = 'v'
           and {not_in_extension("pg_class", "c.oid")}
           and (n.nspname::text = any(%(exposed)s)
                or (n.nspname::text = any(%(schemas)s) and {selectable_by_api_roles("c.oid")}))
           and not exists (
                 select from unnest(coalesce(c.reloptions, '{{}}')) as o(opt)
                  where lower(o.opt) in ('security_invoker=1', 'security_invoker=true',
                                         'security_invoker=yes', 'security_invoker=on'))
         order by 1
        """,
    )
    assert not offenders, report("security definer views", offenders)


def test_no_materialized_view_is_readable_by_api_roles(conn: psycopg.Connection) -> None:
    """0016_materialized_view_in_api: materialized views have no RLS."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': materialized view readable by anon or authenticated'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind = 'm'
           and n.nspname::text = any(%(all_schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and {selectable_by_api_roles("c.oid")}
         order by 1
        """,
    )
    assert not offenders, report("materialized views in the API", offenders)


def test_no_foreign_table_is_readable_by_api_roles(conn: psycopg.Connection) -> None:
    """0017_foreign_table_in_api: foreign tables have no RLS."""
    offenders = lint(
        conn,
        f"""
        select c.oid::regclass::text || ': foreign table readable by anon or authenticated'
          from pg_catalog.pg_class c
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where c.relkind = 'f'
           and n.nspname::text = any(%(all_schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and {selectable_by_api_roles("c.oid")}
         order by 1
        """,
    )
    assert not offenders, report("foreign tables in the API", offenders)


def test_no_view_readable_by_api_roles_exposes_auth_users(conn: psycopg.Connection) -> None:
    """0002_auth_users_exposed: no view or materialized view over auth.users that anon
    or authenticated can read. Stricter than splinter: a security_invoker view counts
    too (auth.users has no RLS on Supabase, so splinter flags those as well)."""
    offenders = lint(
        conn,
        f"""
        select distinct c.oid::regclass::text || ': reads auth.users and is readable by API roles'
          from pg_catalog.pg_depend d
          join pg_catalog.pg_rewrite rw on rw.oid = d.objid
          join pg_catalog.pg_class c on c.oid = rw.ev_class
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where d.classid = 'pg_catalog.pg_rewrite'::regclass
           and d.refclassid = 'pg_catalog.pg_class'::regclass
           and d.refobjid = to_regclass('auth.users')
           and c.relkind in ('v', 'm')
           and n.nspname::text = any(%(all_schemas)s)
           and {selectable_by_api_roles("c.oid")}
         order by 1
        """,
    )
    assert not offenders, report("views exposing auth.users", offenders)


def test_no_foreign_key_references_an_auth_unique_constraint(conn: psycopg.Connection) -> None:
    """0021_fkey_to_auth_unique: Supabase may change auth's unique constraints (other than
    primary keys), which would break such a foreign key."""
    offenders = lint(
        conn,
        """
        select con.conrelid::regclass::text || ': foreign key ' || quote_ident(con.conname)
               || ' references the auth unique index ' || con.conindid::regclass::text
          from pg_catalog.pg_constraint con
          join pg_catalog.pg_class c on c.oid = con.conrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
          join pg_catalog.pg_class ref on ref.oid = con.confrelid
          join pg_catalog.pg_index i on i.indexrelid = con.conindid
         where con.contype = 'f'
           and n.nspname::text = any(%(schemas)s)
           and ref.relnamespace::regnamespace::text = 'auth'
           and i.indisunique
           and not i.indisprimary
         order by 1
        """,
    )
    assert not offenders, report("foreign keys to auth unique constraints", offenders)


def test_no_column_has_a_reg_type_that_blocks_pg_upgrade(conn: psycopg.Connection) -> None:
    """0018_unsupported_reg_types: pg_upgrade cannot carry these OID-valued types."""
    offenders = lint(
        conn,
        f"""
        select a.attrelid::regclass::text || '.' || quote_ident(a.attname) || ' is of type '
               || a.atttypid::regtype::text
          from pg_catalog.pg_attribute a
          join pg_catalog.pg_class c on c.oid = a.attrelid
          join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         where a.attnum > 0
           and not a.attisdropped
           and n.nspname::text = any(%(schemas)s)
           and {not_in_extension("pg_class", "c.oid")}
           and a.atttypid in ('pg_catalog.regcollation'::regtype, 'pg_catalog.regconfig'::regtype,
                              'pg_catalog.regdictionary'::regtype,
                              'pg_catalog.regnamespace'::regtype, 'pg_catalog.regoper'::regtype,
                              'pg_catalog.regoperator'::regtype, 'pg_catalog.regproc'::regtype,
                              'pg_catalog.regprocedure'::regtype)
         order by 1
        """,
    )
    assert not offenders, report("columns of unsupported reg* types", offenders)


# -- Functions -----------------------------------------------------------------------


def test_every_function_sets_its_search_path(conn: psycopg.Connection) -> None:
    """0011_function_search_path_mutable: every function and procedure carries
    `set search_path`, so callers cannot make it resolve names to objects of theirs.
    Aggregates cannot carry it and are the next test's concern."""
    offenders = lint(
        conn,
        f"""
        select p.oid::regprocedure::text || ': search_path is not set'
          from pg_catalog.pg_proc p
          join pg_catalog.pg_namespace n on n.oid = p.pronamespace
         where n.nspname::text = any(%(schemas)s)
           and p.prokind <> 'a'
           and {not_in_extension("pg_proc", "p.oid")}
           and not exists (select from unnest(coalesce(p.proconfig, '{{}}')) as s(setting)
                            where s.setting ~ '^search_path=')
         order by 1
        """,
    )
    assert not offenders, report("functions with a mutable search_path", offenders)


def test_no_aggregate_is_left_for_splinter_to_report_as_search_path_mutable(
    conn: psycopg.Connection,
) -> None:
    """0011_function_search_path_mutable, as splinter runs it: its query does not skip
    aggregates (supabase/splinter#139; fixes #148 and #178 not merged), and CREATE
    AGGREGATE has no SET clause, so every aggregate in our schemas is reported whatever
    its support functions set. Fold with a plain function over an array instead."""
    offenders = lint(
        conn,
        f"""
        select p.oid::regprocedure::text
               || ': an aggregate, which splinter reports as having a mutable search_path'
          from pg_catalog.pg_proc p
          join pg_catalog.pg_namespace n on n.oid = p.pronamespace
         where n.nspname::text = any(%(schemas)s)
           and p.prokind = 'a'
           and {not_in_extension("pg_proc", "p.oid")}
         order by 1
        """,
    )
    assert not offenders, report("aggregates reported by splinter 0011", offenders)


def _security_definer_functions_executable_by(conn: psycopg.Connection, role: str) -> list[str]:
    return lint(
        conn,
        f"""
        select p.oid::regprocedure::text || ': security definer, executable by ' || %(role)s
               || ' through /rest/v1/rpc'
          from pg_catalog.pg_proc p
          join pg_catalog.pg_namespace n on n.oid = p.pronamespace
         where p.prosecdef
           and n.nspname::text = any(%(exposed)s)
           and {not_in_extension("pg_proc", "p.oid")}
           and pg_catalog.has_function_privilege(%(role)s, p.oid, 'EXECUTE')
         order by 1
        """,
        role=role,
    )


def test_no_security_definer_function_in_an_exposed_schema_is_executable_by_anon(
    conn: psycopg.Connection,
) -> None:
    """0028_anon_security_definer_function_executable: the RPCs in public are security
    invoker; the privileged work sits in kiwi_internal, which is not exposed."""
    offenders = _security_definer_functions_executable_by(conn, "anon")
    assert not offenders, report("security definer RPCs open to anon", offenders)


def test_no_security_definer_function_in_an_exposed_schema_is_executable_by_authenticated(
    conn: psycopg.Connection,
) -> None:
    """0029_authenticated_security_definer_function_executable."""
    offenders = _security_definer_functions_executable_by(conn, "authenticated")
    assert not offenders, report("security definer RPCs open to authenticated", offenders)


# -- Splinter 0028/0029, verbatim, with kiwi_internal treated as exposed ----------------
#
# The two lints above are our own queries over the schemas the API exposes. These run
# splinter's own SQL (github.com/supabase/splinter at 55db5b1, lints/0028_*.sql and
# lints/0029_*.sql, vendored unchanged in tests/splinter/) with `pgrst.db_schemas` naming
# kiwi_internal too: if kiwi_internal were ever exposed, or a caller reached it through
# a public function, no security definer function there may be executable by anon or
# authenticated unless it checks the caller itself. Those that must stay executable are
# listed below, each with the reason; every entry must still be reported (a function
# that stops being security definer or executable leaves the list).


def _splinter_lint(name: str) -> str:
    """The query of a vendored splinter lint: its view's body, `create view ... as` dropped."""
    text = (ROOT / "tests" / "splinter" / f"{name}.sql").read_text()
    head, _, body = text.partition("\n")
    assert head.startswith("create view lint."), head
    return body


SPLINTER_0028 = _splinter_lint("0028_anon_security_definer_function_executable")
SPLINTER_0029 = _splinter_lint("0029_authenticated_security_definer_function_executable")

# Security definer functions anon may execute, and why that is safe: each takes the
# caller only from the session (auth.uid(), auth.jwt(), caller_role(), caller_is_admin(),
# my_namespaces(), caller_identity()), never from an argument, and refuses or narrows
# accordingly. Keys are splinter's `schema.name(arguments)`.
ANON_SECURITY_DEFINER_ALLOWED = {
    "kiwi_internal.record_audit(p_entry jsonb)": (
        "record_audit calls it; the row's caller is caller_identity() (anon: role:anon), never taken from the "
        "entry; anon's rows within registry_limits.anon_audit_rows_per_minute (anon_audit_take)"
    ),
    "kiwi_internal.record_audits(p_entries jsonb)": (
        "record_audits calls it; every row's caller is caller_identity() (anon: role:anon), never taken from an "
        "entry; anon's batch all or none within registry_limits.anon_audit_rows_per_minute (anon_audit_take)"
    ),
    "kiwi_internal.my_namespaces(p_owned_only boolean)": (
        "RLS policies call it as the querying user; it returns only auth.uid()'s own memberships"
    ),
    "kiwi_internal.resolve_chains(p_refs text[], p_version text)": (
        "resolve_executor_chain(s) call it; private tools are visible per caller_is_admin()/my_namespaces()"
    ),
    "kiwi_internal.execution_plan(p_tool_id text, p_version text)": (
        "resolve_execution_plan calls it; visibility per caller_is_admin()/my_namespaces(), never per argument"
    ),
    "kiwi_internal.chains_compact(p_tool_ids text[])": (
        "resolve_executor_chains_compact calls it; every chain link is checked visible per "
        "caller_is_admin()/my_namespaces() on public.tools, else resolve_chains walks it as the caller"
    ),
    "kiwi_internal.publish(p_manifest jsonb, p_files jsonb, p_manifest_yaml text, p_approval_id uuid)": (
        "publish_tool_version calls it; it refuses whoever may not write the namespace (can_publish_to) "
        "or the tool (refuse_command_write, unless an admin approved this content for this caller: "
        "spend_command_write_approval checks requested_by = caller_identity()): anon always"
    ),
    "kiwi_internal.request_publish_approval(p_manifest jsonb, p_files jsonb, p_session text)": (
        "request_publish_approval calls it; anon is refused, others only for a namespace they may publish into "
        "(can_publish_to), recorded as caller_identity()'s; only admins decide it (decide_approval)"
    ),
    "kiwi_internal.chain_attestations(p_tool_id text, p_version text)": (
        "resolve_chain_attestations calls it; resolve_chains decides by exact reference what the caller may read, "
        "and only those versions' rows are read"
    ),
    "kiwi_internal.similar_search_words(p_word text)": (
        "search_tools calls it; it offers only words of tools the caller may list (caller_is_admin()/my_namespaces())"
    ),
    "kiwi_internal.has_embeddings(p_model text)": (
        "search_tools calls it; it tells only whether any vector of a model is stored, never whose or of what"
    ),
    "kiwi_internal.unembedded_tools(p_model text, p_refs text[])": (
        "unembedded_tools calls it; of the refs given, only tools the caller may list "
        "(caller_is_admin()/my_namespaces()), and only whether each has a vector of the model"
    ),
    "kiwi_internal.nearest_tools(p_model text, p_embedding extensions.vector, p_limit integer, "
    "p_min_similarity real, p_type text, p_category text, p_mcp text, p_namespace text)": (
        "search_tools calls it; it returns only tools the caller may list (caller_is_admin()/my_namespaces())"
    ),
    "kiwi_internal.take_rate_limit(p_tool_id text, p_server text, p_session text)": (
        "take_rate_limit calls it; it counts only in the caller's own buckets (bucket_owner(), from the session)"
    ),
    "kiwi_internal.version_source(p_tool_id text, p_version text)": (
        "tool_version_source calls it; it reads only what can_read() lets the caller read"
    ),
    "kiwi_internal.check_call(p jsonb)": (
        "the gate (check_call) calls it; anon counts in its own buckets and never gets an approval"
    ),
    "kiwi_internal.add_signature(p_tool_id text, p_version text, p_signature jsonb)": (
        "sign_tool_version calls it; only those who may publish into the namespace (can_publish_to) sign: never anon"
    ),
    "kiwi_internal.search_popular_floor()": (
        "search_tools calls it; it returns one number about the whole registry (the least use of its most used "
        "twentieth, from the popularity index's statistics), never a tool, a namespace or a word"
    ),
    "kiwi_internal.search_tools(p_query text, p_tool_type text, p_category text, p_limit integer, "
    "p_embedding real[], p_model text)": (
        "public.search_tools calls it; every read of public.tools carries the tools' RLS written out "
        "(public for anon, also my_namespaces() for the signed-in, all for caller_is_admin()), so it lists "
        "only what the caller could list under RLS"
    ),
}

# Signed-in callers may also execute these, each checking the caller itself.
AUTHENTICATED_SECURITY_DEFINER_ALLOWED = {
    **ANON_SECURITY_DEFINER_ALLOWED,
    "kiwi_internal.set_version_status(p_tool_id text, p_version text, p_action text, p_message text)": (
        "yank/unyank/deprecate call it; writable_tool() refuses non-members and the command rule non-admins"
    ),
    "kiwi_internal.delete_tool(p_tool_id text)": "delete_tool calls it; writable_tool() decides, as for yanking",
    "kiwi_internal.attach_approval_parameters(p_id uuid, p_params jsonb)": (
        "attach_approval_parameters calls it: only the approval's requester (from the claims), only "
        "parameters hashing to its params_sha256"
    ),
    "kiwi_internal.approval_parameters(p_ids text[])": (
        "approval_parameters calls it: a queued run's inputs, only for approvals the caller may read "
        "(requester, namespace owner, admin: from the claims)"
    ),
    "kiwi_internal.pending_search_texts(p_model text, p_limit integer, p_after text, p_all boolean)": (
        "pending_search_texts calls it; only texts of tools the caller may embed (my_namespaces(), all for admins); "
        "p_all only for admins"
    ),
    "kiwi_internal.store_search_embeddings(p_model text, p_items jsonb)": (
        "store_search_embeddings calls it; only for texts of tools the caller may embed (my_namespaces()), and only "
        "admins replace a stored vector"
    ),
    "kiwi_internal.record_runs(p_runs jsonb)": (
        "record_run(s) call it; each record's caller is caller_identity(), never taken from the record"
    ),
    "kiwi_internal.record_thread_usage(p_usage jsonb)": (
        "record_thread_usage calls it; anon refused, the row's caller is caller_identity() and its cost priced from "
        "model_prices, never taken from p_usage"
    ),
    "kiwi_internal.open_context(p_session text, p_version_id uuid, p_parent uuid, p_permissions jsonb)": (
        "open_context calls it; the directive version must be one can_read() allows, the parent the caller's own"
    ),
    "kiwi_internal.approval_required(p_tool_id text)": (
        "approval_required calls it; the policy of a tool readable_tool() lets the caller read, else only a policy "
        "the caller may read (caller_is_admin(), my_namespaces())"
    ),
    "kiwi_internal.request_approval(p jsonb)": (
        "request_approval calls it; only for a tool the caller can read, recorded as caller_identity()'s"
    ),
    "kiwi_internal.decide_approval(p_id uuid, p_approve boolean, p_reason text, p_decider_session text)": (
        "decide_approval calls it; admins, or owners of the tool's namespace (my_namespaces(true)) who did not ask"
    ),
    "kiwi_internal.use_approval(p_id uuid, p_tool_id text, p_params_sha256 text, p_content_hash text)": (
        "use_approval calls it; only the requester (caller_identity()) uses an approval"
    ),
    "kiwi_internal.enqueue_run_as_caller(p jsonb)": (
        "enqueue_run calls it; anon refused, the tool one readable_tool() lets the caller read, the run recorded as "
        "the caller of the request's claims (request_claims()), never of p"
    ),
    "kiwi_internal.cancel_queued_run(p_id uuid)": (
        "cancel_queued_run calls it; only the run's caller (caller_identity()) or an admin, others get not found"
    ),
    "kiwi_internal.add_schedule(p jsonb)": (
        "add_schedule calls it; anon refused, a tool readable_tool() allows, owned by caller_identity()"
    ),
    "kiwi_internal.set_schedule_enabled(p_ref text, p_enabled boolean)": (
        "set_schedule_enabled calls it; my_schedule() finds only the caller's own (admins: any, by id)"
    ),
    "kiwi_internal.remove_schedule(p_ref text)": (
        "remove_schedule calls it; my_schedule() finds only the caller's own (admins: any, by id)"
    ),
    "kiwi_internal.hold_mcp_tool_change(p_manifest jsonb)": (
        "hold_mcp_tool_change calls it; anon refused, an mcp_tool readable_tool() allows, only for those "
        "can_publish_to() its namespace, recorded as caller_identity()"
    ),
    "kiwi_internal.decide_mcp_tool_change(p_id uuid, p_approve boolean, p_reason text)": (
        "decide_mcp_tool_change calls it; a change the caller may read, only for those can_publish_to() its "
        "namespace, and approving publishes through publish_tool_version as the caller"
    ),
}


def _splinter(conn: psycopg.Connection, query: str) -> list[str]:
    """Run a splinter lint as splinter runs it, with kiwi_internal among the exposed schemas;
    returns `schema.name(arguments)` of each function it reports."""
    exposed = ",".join(sorted({*EXPOSED_SCHEMAS, "kiwi_internal"}))
    with conn.transaction(force_rollback=True), conn.cursor() as cur:
        cur.execute("set local search_path = ''")
        cur.execute("select pg_catalog.set_config('pgrst.db_schemas', %s, true)", (exposed,))
        cur.execute(query)  # no parameters: the lint's own format('%s ...') stays as written
        names = [d.name for d in cur.description or []]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    return [f"{r['metadata']['schema']}.{r['metadata']['name']}({r['metadata']['arguments']})" for r in rows]


def _check_splinter(conn: psycopg.Connection, query: str, allowed: dict[str, str], role: str) -> None:
    reported = _splinter(conn, query)
    offenders = sorted(set(reported) - set(allowed))
    assert not offenders, report(f"security definer functions executable by {role} (kiwi_internal exposed)", offenders)
    stale = sorted(set(allowed) - set(reported))
    assert not stale, report(f"allow-listed for {role} but no longer reported (remove from the list)", stale)


def test_splinter_0028_finds_no_unchecked_security_definer_function_even_with_kiwi_internal_exposed(
    conn: psycopg.Connection,
) -> None:
    """0028_anon_security_definer_function_executable, splinter's own query, kiwi_internal exposed."""
    _check_splinter(conn, SPLINTER_0028, ANON_SECURITY_DEFINER_ALLOWED, "anon")


def test_splinter_0029_finds_no_unchecked_security_definer_function_even_with_kiwi_internal_exposed(
    conn: psycopg.Connection,
) -> None:
    """0029_authenticated_security_definer_function_executable, splinter's own query, kiwi_internal exposed."""
    _check_splinter(conn, SPLINTER_0029, AUTHENTICATED_SECURITY_DEFINER_ALLOWED, "authenticated")


def test_splinter_0028_reports_a_security_definer_function_anon_may_execute(conn: psycopg.Connection) -> None:
    """The lint is live: a security definer function granted to anon in kiwi_internal is reported."""
    with conn.transaction(force_rollback=True):
        conn.execute(
            "create function kiwi_internal.lint_probe() returns int language sql security definer"
            " set search_path = '' as 'select 1'"
        )
        conn.execute("grant execute on function kiwi_internal.lint_probe() to anon")
        reported = _splinter(conn, SPLINTER_0028)
        assert "kiwi_internal.lint_probe()" in reported, reported


def test_no_function_is_executable_by_the_public_pseudo_role(
    conn: psycopg.Connection,
) -> None:
    """Project rule: PostgreSQL grants EXECUTE to PUBLIC on every new function; that grant
    is revoked (by default privileges, which must be global to take it away) and each API
    role is granted explicitly. Regression: a per-schema default left kiwi_internal open."""
    offenders = lint(
        conn,
        f"""
        select p.oid::regprocedure::text || ': executable by PUBLIC ('
               || coalesce(p.proacl::text, 'default privileges') || ')'
          from pg_catalog.pg_proc p
          join pg_catalog.pg_namespace n on n.oid = p.pronamespace
         where n.nspname in ('public', 'kiwi_internal')
           and {not_in_extension("pg_proc", "p.oid")}
           and exists (select from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                        where a.grantee = 0 and a.privilege_type = 'EXECUTE')
         order by 1
        """,
    )
    assert not offenders, report("functions executable by PUBLIC", offenders)


# -- Grants and extensions -----------------------------------------------------------


def test_anon_and_authenticated_cannot_write_tools_versions_or_files(
    conn: psycopg.Connection,
) -> None:
    """Project rule: tools, tool_versions and tool_version_files are written only through
    the publishing and lifecycle RPCs, tool_runs only through record_run, audit_log only
    through record_audit, and rate_limits only by admins, so anon
    and authenticated hold no INSERT, UPDATE or DELETE on them (nor TRUNCATE, which
    skips RLS), not even on a column or through PUBLIC."""
    offenders = lint(
        conn,
        """
        with registry as (
          select t.name, to_regclass('public.' || quote_ident(t.name)) as oid
            from unnest(%(tables)s::text[]) as t(name)
        )
        select 'public.' || g.name || ': table is missing' as offender
          from registry g
         where g.oid is null
        union all
        select g.oid::text || ': ' || r.role || ' may ' || w.priv
          from registry g
         cross join unnest(%(roles)s::text[]) as r(role)
         cross join unnest(array['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) as w(priv)
         where g.oid is not null
           and (pg_catalog.has_table_privilege(r.role, g.oid, w.priv)
                or (w.priv in ('INSERT', 'UPDATE')
                    and pg_catalog.has_any_column_privilege(r.role, g.oid, w.priv)))
         order by 1
        """,
        tables=REGISTRY_TABLES,
        roles=API_ROLES,
    )
    assert not offenders, report("API roles allowed to write the registry", offenders)


def test_no_extension_is_installed_in_public(conn: psycopg.Connection) -> None:
    """0014_extension_in_public: extensions live in the `extensions` schema."""
    offenders = lint(
        conn,
        """
        select quote_ident(e.extname) || ' is installed in schema public'
          from pg_catalog.pg_extension e
         where e.extnamespace = 'public'::regnamespace
           and e.extname <> 'plpgsql'
         order by 1
        """,
    )
    assert not offenders, report("extensions in public", offenders)


def test_every_extension_is_at_its_default_version(conn: psycopg.Connection) -> None:
    """0022_extension_versions_outdated: `alter extension ... update` after the server
    ships a newer version."""
    offenders = lint(
        conn,
        """
        select quote_ident(x.name) || ' is at ' || x.installed_version || ', the server offers '
               || x.default_version
          from pg_catalog.pg_available_extensions x
         where x.installed_version is not null
           and x.default_version is not null
           and x.installed_version <> x.default_version
           and exists (select from pg_catalog.pg_available_extension_versions v
                        where v.name = x.name and v.installed)
         order by 1
        """,
    )
    assert not offenders, report("outdated extensions", offenders)
