"""The SQL is written once: supabase/schemas/ is the source, the migrations build the same database.

Each function is defined in exactly one schema file, and a database built from the schema
files (in lexical order, as the Supabase CLI applies them) has the same catalog as one built
from supabase/migrations/: every function's definition, privileges and comment, every
table, view and type with its columns, constraints, indexes, triggers, policies and
grants, the schemas and default privileges, and the rows the migrations insert.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.conftest import ROOT
from tests.test_migrations import apply

SCHEMAS = sorted((ROOT / "supabase" / "schemas").glob("*.sql"))
MIGRATIONS = sorted((ROOT / "supabase" / "migrations").glob("*.sql"))
OURS = "('public', 'kiwi_internal', 'auth', 'extensions')"
DEFINITION = re.compile(r"^\s*create\s+(?:or\s+replace\s+)?function\s+([\w.]+)\s*\(", re.I | re.M)

# One query per kind of object; each returns rows that name the object, so a difference
# says what differs. Columns are listed in order without attnum (dropped columns leave gaps).
CATALOG = {
    "schemas": f"""
        select n.nspname, n.nspacl::text, obj_description(n.oid, 'pg_namespace')
          from pg_namespace n where n.nspname in {OURS}""",
    "functions": f"""
        select p.oid::regprocedure::text, pg_get_functiondef(p.oid), p.proacl::text,
               obj_description(p.oid, 'pg_proc')
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname in {OURS} and p.prokind in ('f', 'p')
           and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')""",
    "relations": f"""
        select c.oid::regclass::text, c.relkind, c.relacl::text, c.relrowsecurity, c.relforcerowsecurity,
               c.reloptions::text, obj_description(c.oid, 'pg_class'),
               case when c.relkind in ('v', 'm') then pg_get_viewdef(c.oid) end,
               case when c.relkind = 'i' then pg_get_indexdef(c.oid) end
          from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname in {OURS}
           and not exists (select 1 from pg_depend d where d.objid = c.oid and d.deptype = 'e')""",
    "columns": f"""
        select c.oid::regclass::text,
               row_number() over (partition by c.oid order by a.attnum), a.attname,
               format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attgenerated, a.attstorage,
               a.attcollation, pg_get_expr(d.adbin, d.adrelid), a.attacl::text, col_description(c.oid, a.attnum)
          from pg_attribute a
          join pg_class c on c.oid = a.attrelid
          join pg_namespace n on n.oid = c.relnamespace
          left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
         where n.nspname in {OURS} and a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'v', 'c', 'm')
           and not exists (select 1 from pg_depend x where x.objid = c.oid and x.deptype = 'e')""",
    "constraints": f"""
        select coalesce(c.conrelid::regclass::text, c.contypid::regtype::text), c.conname,
               pg_get_constraintdef(c.oid), c.convalidated, c.condeferrable, c.condeferred
          from pg_constraint c join pg_namespace n on n.oid = c.connamespace
         where n.nspname in {OURS}""",
    "triggers": f"""
        select t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
          from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
         where n.nspname in {OURS} and not t.tgisinternal""",
    "policies": f"""
        select schemaname, tablename, policyname, permissive, roles::text, cmd, qual, with_check
          from pg_policies where schemaname in {OURS}""",
    "default privileges": """
        select defaclrole::regrole::text, defaclnamespace::regnamespace::text, defaclobjtype, defaclacl::text
          from pg_default_acl""",
    "extensions": "select extname, extnamespace::regnamespace::text from pg_extension",
    "rows": """
        select 'tool_type_rules', to_jsonb(r) from public.tool_type_rules r
        union all select 'registry_limits', to_jsonb(r) - 'updated_at' from public.registry_limits r
        union all select 'registry_quotas', to_jsonb(r) - 'updated_at' from public.registry_quotas r
        union all select 'namespaces', to_jsonb(r) - 'created_at' from public.namespaces r""",
}


def catalog(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every object the SQL makes, as sorted rows per kind."""
    with psycopg.connect(url) as conn:
        return {kind: sorted(conn.execute(query).fetchall(), key=repr) for kind, query in CATALOG.items()}


@pytest.fixture
def two_databases(database_url: str) -> Iterator[tuple[str, str]]:
    names = [f"kiwi_schema_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with psycopg.connect(database_url, autocommit=True) as admin:
        for name in names:
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        base = database_url.rsplit("/", 1)[0]
        yield base + "/" + names[0], base + "/" + names[1]
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            for name in names:
                admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_no_function_is_defined_twice() -> None:
    assert SCHEMAS
    where: dict[str, list[str]] = {}
    for file in SCHEMAS:
        for name in DEFINITION.findall(file.read_text(encoding="utf-8")):
            where.setdefault(name.lower(), []).append(file.name)
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, f"defined more than once: {twice}"
    assert len(where) > 200, "the pattern should find the project's functions"


def test_the_migrations_define_no_function_the_schema_files_lack() -> None:
    """A function changed only in a migration would make the schema files stale."""
    in_schemas = Counter(n.lower() for f in SCHEMAS for n in DEFINITION.findall(f.read_text(encoding="utf-8")))
    in_migrations = {n.lower() for f in MIGRATIONS for n in DEFINITION.findall(f.read_text(encoding="utf-8"))}
    assert in_migrations <= set(in_schemas), sorted(in_migrations - set(in_schemas))


def test_a_database_from_the_schema_files_equals_one_from_the_migrations(two_databases: tuple[str, str]) -> None:
    from_schemas, from_migrations = two_databases
    apply(from_schemas, SCHEMAS)
    apply(from_migrations, MIGRATIONS)
    want, got = catalog(from_schemas), catalog(from_migrations)
    assert len(want["functions"]) > 200 and len(want["policies"]) > 30 and want["rows"]
    for kind in CATALOG:
        only_schemas = [row for row in want[kind] if row not in got[kind]]
        only_migrations = [row for row in got[kind] if row not in want[kind]]
        assert not only_schemas and not only_migrations, (kind, only_schemas[:3], only_migrations[:3])
