"""`kiwi mcp import`: tools/list published as mcp_tool rows; unchanged tools change
nothing; an upstream change is held until approved, then a new version; pinned versions stay."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import Runner, import_server
from runner.cli.mcp import add_mcp_commands, print_report
from runner.handlers.mcp_tool import McpToolHandler
from runner.mcp_client.importer import cut_description, next_version, tool_id_for

from . import EVERYTHING, NODE_MODULES, mcp_runner, stdio_server, unique
from .long_description_server import description

Publish = Callable[[dict[str, Any]], str]


@pytest.fixture
def server(conn: psycopg.Connection) -> Iterator[str]:
    """A fresh everything server row; deleted afterwards with every tool it executes."""
    ref = unique("everything")
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stdio_server(ref, [str(EVERYTHING), "stdio"])),))
    yield ref
    conn.execute("delete from tools where executor_id = %s", (ref,))
    conn.execute("delete from tools where ref = %s", (ref,))


@pytest.fixture
async def mcp(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Runner, McpToolHandler]]:
    runner, handler = mcp_runner(database_url, tmp_path / "cache")
    yield runner, handler
    await runner.aclose()


# what server-everything's echo declares of itself (its MCP tool annotations)
ECHO_HINTS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def versions(conn: psycopg.Connection, server: str) -> list[tuple[str, str, bool]]:
    rows = conn.execute(
        "select t.ref, v.version, v.is_latest from tool_versions v join tools t on t.id = v.tool_uuid"
        " where t.executor_id = %s order by 1, 2",
        (server,),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


async def test_import_publishes_one_mcp_tool_per_listed_tool(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert report.ok and report.counts() == {"created": len(report.tools)} and len(report.tools) >= 10
    row = conn.execute(
        "select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s",
        (f"{server}.echo",),
    ).fetchone()
    assert row is not None
    manifest = row[0]
    assert manifest["tool_type"] == "mcp_tool" and manifest["executor"] == server
    assert manifest["description"] == "Echoes back the input string"
    assert manifest["parameters"]["properties"]["message"]["type"] == "string"
    assert manifest["config"] == {"tool": "echo", "annotations": ECHO_HINTS} and manifest["version"] == "1.0.0"
    assert manifest["metadata"]["mcp_import"]["upstream_changed"] is False


async def test_reimporting_unchanged_tools_changes_nothing(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, server, runner.environ)
    before = versions(conn, server)
    again = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert again.counts() == {"unchanged": len(again.tools)}
    assert versions(conn, server) == before


async def test_an_upstream_change_is_held_then_approved_as_a_new_version_and_pins_keep_theirs(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, server, runner.environ)
    # What the registry holds differs from what the server now says: as if the upstream
    # description and schema of echo had changed since the last import.
    echo = f"{server}.echo"
    stale = {
        "tool_id": echo,
        "tool_type": "mcp_tool",
        "executor": server,
        "version": "1.0.1",
        "description": "Echoes (old wording)",
        "config": {"tool": "echo", "annotations": ECHO_HINTS},
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}, "loud": {"type": "boolean"}}},
    }
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stale),))
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    held = [t for t in report.tools if t.status == "held"]
    assert [(t.tool_id, t.previous_version, t.version, t.changed) for t in held] == [
        (echo, "1.0.1", "1.1.0", ["description", "inputSchema"])
    ]
    assert (await runner.plan(echo)).version == "1.0.1", "held: every caller keeps the approved version"
    assert held[0].change is not None
    await runner.registry.decide_mcp_change(held[0].change, True, "read it")
    row = conn.execute(
        "select v.manifest, v.changelog, v.is_latest from tool_versions v join tools t on t.id = v.tool_uuid"
        " where t.ref = %s and v.version = '1.1.0'",
        (echo,),
    ).fetchone()
    assert row is not None
    manifest, changelog, is_latest = row
    assert is_latest and "description and inputSchema" in changelog
    assert manifest["metadata"]["mcp_import"] == {
        "tool": "echo",
        "server": server,
        "upstream_changed": True,
        "changed": ["description", "inputSchema"],
        "previous_version": "1.0.1",
    }
    # every version still runs, each with its own schema
    for version in ("1.0.0", "1.0.1", "1.1.0", None):
        result = await runner.run(echo, {"message": "pinned"}, version=version)
        assert (result.version or "", result.output) == (version or "1.1.0", "Echo: pinned"), result.error
    assert (await runner.plan(echo, "1.0.1")).parameters["properties"].keys() == {"message", "loud"}  # type: ignore[index]
    assert (await import_server(runner.registry, handler.pool, server, runner.environ)).counts().get("held") is None


async def test_changed_annotations_are_a_change_of_their_own(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    """Whether a cut-off call may be retried follows the annotations, so an upstream tool that
    stops calling itself read-only must not slip through as unchanged."""
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, server, runner.environ)
    echo = f"{server}.echo"
    (latest,) = conn.execute(
        "select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s and v.is_latest",
        (echo,),
    ).fetchone()
    stale = {k: latest[k] for k in ("tool_id", "tool_type", "executor", "description", "parameters")}
    stale.update(version="1.0.1", config={"tool": "echo", "annotations": {**ECHO_HINTS, "readOnlyHint": False}})
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stale),))
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert [(t.tool_id, t.changed) for t in report.tools if t.status == "held"] == [(echo, ["annotations"])]


async def test_a_tool_gone_upstream_is_reported_missing_and_kept(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    gone = {"tool_id": f"{server}.retired", "tool_type": "mcp_tool", "executor": server, "version": "1.0.0"}
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(gone),))
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert [(t.tool_id, t.status) for t in report.tools if t.status == "missing"] == [(f"{server}.retired", "missing")]


async def test_kiwi_mcp_import_json(
    server: str, database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KIWI_DATABASE_URL", database_url)
    monkeypatch.setenv("KIWI_NODE_MODULES", str(NODE_MODULES))
    monkeypatch.setenv("KIWI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KIWI_ADMIN", "1")  # its tools go into `public`, beside the server
    parser = argparse.ArgumentParser(prog="kiwi")
    add_mcp_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["mcp", "import", server, "--json"])
    out = io.StringIO()
    with redirect_stdout(out):
        code = await args.handler(args)
    report = json.loads(out.getvalue())
    assert code == 0 and report["server"] == server and report["ok"]
    assert {t["tool_id"] for t in report["tools"]} >= {f"{server}.echo", f"{server}.get-sum"}


def test_tool_ids_and_versions() -> None:
    assert tool_id_for("srv", "read/file name") == "srv.read_file_name"
    assert tool_id_for("acme/srv", "echo") == "acme/srv.echo"
    assert next_version("1.0.0") == "1.1.0" and next_version("2.7.3-beta") == "2.8.0"


STRUCTURED = "get-structured-content"  # server-everything's tool that declares an outputSchema


def latest_manifest(conn: psycopg.Connection, ref: str) -> dict[str, Any]:
    row = conn.execute(
        "select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s and v.is_latest",
        (ref,),
    ).fetchone()
    assert row is not None
    return dict(row[0])


async def test_import_keeps_an_upstream_output_schema_as_outputs_and_runs_are_held_to_it(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, server, runner.environ)
    weather = latest_manifest(conn, f"{server}.{STRUCTURED}")
    outputs = weather["outputs"]
    assert outputs["type"] == "object"
    assert {k: v["type"] for k, v in outputs["properties"].items()} == {
        "temperature": "number",
        "conditions": "string",
        "humidity": "number",
    }
    assert "outputs" not in latest_manifest(conn, f"{server}.echo"), "a tool without an outputSchema declares none"
    result = await runner.run(f"{server}.{STRUCTURED}", {"location": "Chicago"})
    assert result.status == "success", result.error
    assert result.output == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    assert result.output_schema == outputs


async def test_a_changed_output_schema_is_an_upstream_change_and_a_stale_one_fails_runs(
    mcp: tuple[Runner, McpToolHandler], server: str, conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, server, runner.environ)
    ref = f"{server}.{STRUCTURED}"
    stale = {k: v for k, v in latest_manifest(conn, ref).items() if k not in ("version", "metadata", "changelog")}
    humidity_as_text = {**stale["outputs"]["properties"], "humidity": {"type": "string"}}
    stale.update(version="1.0.1", outputs={**stale["outputs"], "properties": humidity_as_text})
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stale),))
    # what the registry holds no longer matches what the server returns: the run says where
    result = await runner.run(ref, {"location": "New York"})
    assert result.status == "error" and result.failure is not None and result.failure.kind == "output_mismatch"
    assert "output.humidity: must be of type string, not integer" in (result.error or "")
    assert result.output == {"temperature": 33, "conditions": "Cloudy", "humidity": 82}
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    held = [t for t in report.tools if t.status == "held"]
    assert [(t.tool_id, t.changed, t.version) for t in held] == [(ref, ["outputSchema"], "1.1.0")]
    assert held[0].change is not None
    await runner.registry.decide_mcp_change(held[0].change, True)  # a person approves the new schema
    assert (await runner.run(ref, {"location": "New York"})).status == "success"


LONG_SERVER = Path(__file__).with_name("long_description_server.py")


@pytest.fixture
def long_server(conn: psycopg.Connection) -> Iterator[str]:
    """A Python MCP server whose one tool, lookup, describes itself in 5000 characters."""
    ref = unique("long_description")
    manifest = stdio_server(ref, [str(LONG_SERVER), "5000"], command=sys.executable)
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
    yield ref
    conn.execute("delete from tools where executor_id = %s", (ref,))
    conn.execute("delete from tools where ref = %s", (ref,))


async def test_a_description_over_the_registry_limit_is_cut_to_it_and_the_tool_published(
    mcp: tuple[Runner, McpToolHandler], long_server: str, conn: psycopg.Connection
) -> None:
    """Real servers describe some tools in more than publish takes; the import keeps them,
    cut at a word to registry_limits.text_field_chars.description, and says so."""
    runner, handler = mcp
    (limit,) = conn.execute(
        "select (value ->> 'description')::int from registry_limits where name = 'text_field_chars'"
    ).fetchone()
    upstream = description(5000)
    assert limit < len(upstream)
    ref = f"{long_server}.lookup"
    report = await import_server(runner.registry, handler.pool, long_server, runner.environ)
    assert report.ok and [(t.tool_id, t.status) for t in report.tools] == [(ref, "created")], report.as_json()
    stored = latest_manifest(conn, ref)
    cut = stored["description"]
    kept = cut.removesuffix("…")
    assert cut.endswith("…") and len(cut) <= limit and upstream.startswith(kept)
    assert upstream[len(kept)].isspace() and not kept[-1].isspace(), "cut between words"
    assert len(cut) > limit - 20, "no more than the word the limit fell in is dropped"
    assert stored["metadata"]["mcp_import"]["description_cut"] == {"upstream_chars": 5000, "limit": limit}
    note = f"description cut from 5000 to {len(cut)} characters"
    assert [n.startswith(note) for n in report.tools[0].notes] == [True]
    out = io.StringIO()
    with redirect_stdout(out):
        print_report(report)
    assert note in out.getvalue()
    # published, so it runs and is found
    assert (await runner.run(ref, {"word": "kiwi"})).output == {"result": "kiwi: a word"}
    assert ref in [r["tool_id"] for r in await runner.registry.search("glossary definition lookup", limit=50)]
    # the cut text is what the next import compares: nothing changed upstream, nothing is published
    before = versions(conn, long_server)
    again = await import_server(runner.registry, handler.pool, long_server, runner.environ)
    assert [(t.status, t.version) for t in again.tools] == [("unchanged", "1.0.0")]
    assert [n.startswith(note) for n in again.tools[0].notes] == [True], "each import says it is cut"
    assert versions(conn, long_server) == before == [(ref, "1.0.0", True)]


def test_cut_description_keeps_whole_words_and_ends_in_an_ellipsis() -> None:
    assert cut_description("abc def ghi", 11) == "abc def ghi"
    assert cut_description("abc def ghi", None) == "abc def ghi", "no limit row: no cut"
    assert cut_description("abc def ghi", 6) == "abc…", "the limit falls inside def: def goes"
    assert cut_description("abc def ghi", 8) == "abc def…", "def ends where the limit does: kept"
    assert cut_description("abc   def ghi", 9) == "abc…", "no space before the ellipsis"
    assert cut_description("abcdefghij", 5) == "abcd…", "one long word is cut inside"
