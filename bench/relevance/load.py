"""The relevance set (issue 16) in a database of its own, ready to search.

`ensure_relevance_db(dbname)` gives a database holding the real schema (every migration,
then the seed) plus every MCP server of catalog.json and its tools, published the way
`kiwi mcp import` publishes them (runner/mcp_client/importer.py: `tool_id_for`, `tool_manifest`,
version 1.0.0 with `metadata.mcp_import`) through the real publish RPC, then embedded with
the project's local model (runner/search: `embed_pending`, what `kiwi embed` runs). It is
rebuilt only when the migrations, the seed, the catalog or this loader change; otherwise it
is reused as it is (a text still without a vector, after a model change, is embedded).

Names: a catalog server S is served by the MCP server tool `S_mcp`. Where the seed already
has `S_mcp` (github, slack, filesystem, everything, postgres), its tools are imported under
that seeded server, as `kiwi mcp import S_mcp` would; otherwise `S_mcp` is published first,
a stdio server that runs the catalog's pinned package. A query's expected `S.tool` is the
tool `S_mcp.<tool>`; `seed:X` is the seeded tool X.

Used by bench/search_bench.py (part B) and tests/search/test_relevance.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg import sql
from psycopg.conninfo import make_conninfo

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:  # run as a bench script: the runner package is the repository's
    sys.path.insert(0, str(ROOT))

import mcp_types as types  # noqa: E402

from runner import LocalWordLlama, PostgresRegistry, admin, embed_pending  # noqa: E402  # noqa: E402
from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url  # noqa: E402
from runner.mcp_client.importer import cut_description as importer_cut  # noqa: E402
from runner.mcp_client.importer import tool_id_for, tool_manifest  # noqa: E402

CATALOG = HERE / "catalog.json"
QUERIES = HERE / "queries.yaml"
LONG_QUERIES = HERE / "long_queries.yaml"  # requests of two or three sentences
MIGRATIONS_DIR = ROOT / "supabase" / "migrations"
SEED_FILE = ROOT / "supabase" / "seed.sql"
DEFAULT_ADMIN_URL = stack_database_url(login=STACK_SUPERUSER_LOGIN)
DEFAULT_DB = "kiwi_bench_relevance"
DESCRIPTION_LIMIT = 4000  # registry_limits.text_field_chars.description (20261121001350)
LOADER_VERSION = 1  # bump when what is loaded changes shape: databases built before are rebuilt

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Query:
    """One request for a tool, and the registry ids of every tool that answers it."""

    text: str
    expected: tuple[str, ...]  # tool refs in the relevance database
    written: tuple[str, ...]  # as queries.yaml names them (server.tool, seed:id)


@dataclass(frozen=True)
class RelevanceDb:
    dbname: str
    url: str
    built: bool
    seconds: float
    tools: int
    embedded: int  # vectors stored by this call


def expected_ref(name: str) -> str:
    """A name as queries.yaml writes it -> the tool's ref in the relevance database."""
    if name.startswith("seed:"):
        return name[len("seed:") :]
    server, _, tool = name.partition(".")
    return tool_id_for(f"{server}_mcp", tool)


def load_queries(path: Path = QUERIES) -> list[Query]:
    rows = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Query(
            str(r["query"]).strip(),
            tuple(expected_ref(str(e)) for e in r.get("expected") or []),
            tuple(str(e) for e in r.get("expected") or []),
        )
        for r in rows
    ]


def load_catalog(path: Path = CATALOG) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["servers"])


# -- building ---------------------------------------------------------------------------------


def migration_files() -> list[Path]:
    return sorted(MIGRATIONS_DIR.glob("*.sql"))


def source_hash() -> str:
    """What a built relevance database depends on: migrations, seed, catalog and this loader."""
    digest = hashlib.sha256(f"relevance-loader-v{LOADER_VERSION}\n".encode())
    for path in [*migration_files(), SEED_FILE, CATALOG, Path(__file__)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def database_url(admin_url: str, dbname: str) -> str:
    return make_conninfo(admin_url, dbname=dbname)


def _marker() -> str:
    return json.dumps({"kiwi_relevance": True, "hash": source_hash()}, sort_keys=True)


def _apply_sql_files(conn: psycopg.Connection, files: Iterable[Path]) -> None:
    """Each file in its own transaction, as the Supabase CLI applies migrations."""
    for path in files:
        with conn.transaction():
            conn.execute(path.read_text(encoding="utf-8"))  # plain SQL


def cut_description(text: str | None) -> str | None:
    """`text` within the registry's description limit, cut as `kiwi mcp import` cuts it: a few
    real tools (desktop_commander's read_file, start_search, start_process; circleci's
    run_rollback_pipeline, list_component_versions) describe themselves in more than 4000
    characters, which publish refuses."""
    return importer_cut(text, DESCRIPTION_LIMIT) if text is not None else None


def server_manifest(server: dict[str, Any]) -> dict[str, Any]:
    """A stdio MCP server tool running the catalog's pinned package (npx or uvx), shaped as
    the seed's servers are (supabase/seed/filesystem_mcp/tool.yaml)."""
    registry, _, spec = str(server["package"]).partition(":")
    command, args = ("npx", ["-y", spec]) if registry == "npm" else ("uvx", [spec])
    name = str(server["server"])
    return {
        "tool_id": f"{name}_mcp",
        "tool_type": "mcp_server",
        "executor": "subprocess",
        "version": "1.0.0",
        "name": f"{name.replace('_', ' ').title()} MCP server",
        "description": f"The MCP server {spec.rsplit('@', 1)[0] if registry == 'npm' else spec.split('==')[0]}.",
        "category": "mcp",
        "tags": ["mcp", name],
        "config": {"transport": "stdio", "command": command, "args": args},
    }


def tool_manifests(server: dict[str, Any], ref: str, server_row: dict[str, Any]) -> list[dict[str, Any]]:
    """Each catalog tool of `server` as `kiwi mcp import` publishes a new tool (version 1.0.0).
    A description over the registry's limit is cut to it (see `cut_description`)."""
    out = []
    for listed in server["tools"]:
        tool = types.Tool.model_validate({**listed, "description": cut_description(listed.get("description"))})
        manifest = tool_manifest(ref, tool, server_row)
        manifest.update(
            version="1.0.0",
            metadata={"mcp_import": {"tool": tool.name, "server": ref, "upstream_changed": False}},
        )
        out.append(manifest)
    return out


async def publish_catalog(registry: PostgresRegistry, catalog: list[dict[str, Any]]) -> int:
    """Publishes every server (unless seeded) and its tools -> the number of tools published."""
    count = 0
    for server in catalog:
        ref = f"{server['server']}_mcp"
        chain = [] if not await _exists(registry, ref) else await registry.chain(ref)
        if chain:
            server_row = chain[0].get("manifest") or {}
        else:
            server_row = server_manifest(server)
            await registry.publish(server_row, [])
            count += 1
        for manifest in tool_manifests(server, ref, server_row):
            await registry.publish(manifest, [])
            count += 1
    return count


async def _exists(registry: PostgresRegistry, ref: str) -> bool:
    rows = await registry.chains_batch([ref])
    return any(r.get("depth") == 0 and not r.get("error") for r in rows)


async def _load(url: str, catalog: list[dict[str, Any]] | None) -> tuple[int, int]:
    """Publish the catalog (when given) and embed what is pending -> (published, embedded)."""
    async with PostgresRegistry(url, principal=admin(), max_size=2) as registry:
        published = await publish_catalog(registry, catalog) if catalog is not None else 0
        embedded = await embed_pending(registry, LocalWordLlama(), batch=256, progress=False)
    return published, embedded


def ensure_relevance_db(
    dbname: str = DEFAULT_DB, admin_url: str = DEFAULT_ADMIN_URL, *, rebuild: bool = False, log: Log = _stderr
) -> RelevanceDb:
    """The relevance database `dbname`, reused when built from the same sources, else built anew.
    One builder at a time (an advisory lock on the name): a bench and a test, or two sessions'
    tests, may ask at once."""
    url = database_url(admin_url, dbname)
    marker = _marker()
    started = time.perf_counter()
    with psycopg.connect(admin_url, autocommit=True) as lock:
        lock.execute("select pg_advisory_lock(hashtext('kiwi relevance ' || %s))", (dbname,))
        row = lock.execute(
            "select shobj_description(oid, 'pg_database') from pg_database where datname = %s", (dbname,)
        ).fetchone()
        fresh = row is not None and row[0] == marker and not rebuild
        if not fresh:
            log(f"[relevance] {dbname}: building ({'new' if row is None else 'sources changed or rebuild asked'})")
            lock.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(dbname)))
            lock.execute(sql.SQL("create database {} template template0").format(sql.Identifier(dbname)))
            with psycopg.connect(url, autocommit=True) as conn:
                _apply_sql_files(conn, [*migration_files(), SEED_FILE])
        published, embedded = asyncio.run(_load(url, None if fresh else load_catalog()))
        with psycopg.connect(url, autocommit=True) as conn:
            if not fresh:
                conn.execute("vacuum (analyze)")
            row = conn.execute("select count(*) from public.tools").fetchone()
            tools = int(row[0]) if row else 0
        if not fresh:  # last: a build cut short leaves no marker, and is built again
            lock.execute(sql.SQL("comment on database {} is {}").format(sql.Identifier(dbname), sql.Literal(marker)))
    seconds = time.perf_counter() - started
    log(
        f"[relevance] {dbname}: {'built' if not fresh else 'reused'}, {tools} tools "
        f"({published} published, {embedded} texts embedded) in {seconds:.1f}s"
    )
    return RelevanceDb(dbname, url, not fresh, seconds, tools, embedded)


def missing_expected(url: str, queries: list[Query]) -> list[str]:
    """Expected tools the database does not hold (a query naming a tool the catalog lacks)."""
    wanted = sorted({e for q in queries for e in q.expected})
    with psycopg.connect(url) as conn:
        have = {r[0] for r in conn.execute("select ref from public.tools where ref = any (%s)", (wanted,))}
    return [e for e in wanted if e not in have]


if __name__ == "__main__":
    db = ensure_relevance_db(rebuild="--rebuild" in sys.argv)
    print(json.dumps({"dbname": db.dbname, "tools": db.tools, "missing": missing_expected(db.url, load_queries())}))
