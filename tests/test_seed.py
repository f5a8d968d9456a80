"""The seed: compiled from supabase/seed/*/, published through the same function, complete."""

from __future__ import annotations

import re
import subprocess
import sys

import psycopg
import yaml

from runner import load_tool_dir
from tests.conftest import ROOT

SEED_DIR = ROOT / "supabase" / "seed"


def test_seed_sql_is_compiled_from_the_tool_directories() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_seed.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_every_seed_tool_is_published_with_its_manifest_and_files(conn: psycopg.Connection) -> None:
    for directory in sorted(p for p in SEED_DIR.iterdir() if p.is_dir()):
        tool = load_tool_dir(directory)
        row = conn.execute(
            "select v.manifest, v.manifest_yaml,"
            " (select json_object_agg(f.path, f.content_text) from tool_version_files f where f.version_id = v.id)"
            "  from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s and v.is_latest",
            (tool.tool_id,),
        ).fetchone()
        assert row is not None, f"{tool.tool_id} is not in the registry"
        stored_manifest, stored_yaml, stored_files = row
        assert stored_manifest == tool.manifest
        assert yaml.safe_load(stored_yaml) == stored_manifest, "manifest_yaml round-trips to the manifest"
        assert (stored_files or {}) == {f["path"]: f["content_text"] for f in tool.files}


def test_the_seed_has_every_kind_the_registry_promises(conn: psycopg.Connection) -> None:
    rows = dict(conn.execute("select ref, tool_type from tools").fetchall())
    for primitive in ("subprocess", "http_client"):
        assert rows.get(primitive) == "primitive"
    for runtime in ("python_runtime", "bash_runtime", "node_runtime"):
        assert rows.get(runtime) == "runtime"
    for server in ("supabase_mcp", "github_mcp", "filesystem_mcp", "postgres_mcp", "slack_mcp"):
        assert rows.get(server) == "mcp_server"
    chains = {
        ref: [r[0] for r in conn.execute("select tool_id from resolve_executor_chain(%s)", (ref,))]
        for ref in (
            "format_bytes",
            "hello_world",
            "word_count",
            "http_echo",
            "kiwi_tool_authoring",
            "create_script_tool",
        )
    }
    assert chains["format_bytes"] == ["format_bytes", "python_runtime", "subprocess"]
    assert chains["hello_world"] == ["hello_world", "bash_runtime", "subprocess"]
    assert chains["word_count"] == ["word_count", "node_runtime", "subprocess"]
    assert chains["http_echo"] == ["http_echo", "http_client"]
    assert chains["kiwi_tool_authoring"] == ["kiwi_tool_authoring"]
    assert chains["create_script_tool"][-1] == "subprocess"
    python_requires = conn.execute("select resolve_execution_plan('format_bytes') #> '{config,requires}'").fetchone()[0]
    assert python_requires, "the Python example declares a third-party dependency"


# The hosts each seeded stdio server needs from its sandbox: npx fetches the package, then the
# server calls its API (a server missing one hangs at start until its startup timeout).
SERVER_HOSTS = {
    "supabase_mcp": {"registry.npmjs.org:443", "api.supabase.com:443"},
    "postgres_mcp": {"registry.npmjs.org:443"},
    "slack_mcp": {"registry.npmjs.org:443", "slack.com:443"},
    "filesystem_mcp": {"registry.npmjs.org:443"},
}


def test_every_seeded_npx_server_reaches_the_npm_registry_and_its_api(conn: psycopg.Connection) -> None:
    npx = [r[0] for r in conn.execute("select ref from tools where tool_type = 'mcp_server' order by ref")]
    checked = 0
    for ref in npx:
        config = conn.execute("select resolve_execution_plan(%s) -> 'config'", (ref,)).fetchone()[0]
        if config.get("transport") != "stdio":
            continue
        network = set((config.get("sandbox") or {}).get("network") or [])
        if config.get("command") == "npx":
            assert "registry.npmjs.org:443" in network, f"{ref}: npx cannot fetch its package ({network})"
        assert SERVER_HOSTS.get(ref, set()) <= network, f"{ref}: {network}"
        checked += 1
    assert checked >= 4


SECRET_KEY = re.compile(r"token|secret|password|passwd|api_?key|authorization", re.IGNORECASE)


def secret_values(value: object, key: str = "") -> list[tuple[str, object]]:
    """(key, value) pairs whose key names a secret, at any depth."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in secret_values(v, k)]
    if isinstance(value, list):
        return [pair for v in value for pair in secret_values(v, key)]
    return [(key, value)] if SECRET_KEY.search(key) else []


def test_secrets_in_the_seed_are_variable_references_only(conn: psycopg.Connection) -> None:
    configs = conn.execute(
        "select t.ref, v.manifest -> 'config' from tool_versions v join tools t on t.id = v.tool_uuid"
    ).fetchall()
    found = [(ref, key, value) for ref, config in configs for key, value in secret_values(config)]
    assert len(found) >= 4, "the seed's MCP servers and API tool declare their secrets"
    inline = [(ref, key) for ref, key, value in found if not (isinstance(value, str) and "${" in value)]
    assert inline == []
