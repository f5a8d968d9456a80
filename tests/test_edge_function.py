"""The registry edge function (supabase/functions/registry/), run with Deno from npm, through
two independent MCP clients: the MCP Inspector CLI (Node) and the Python SDK's streamable HTTP
client. It is read-only and anonymous: public tools only.

    deno run --allow-net --allow-env --allow-read --config supabase/functions/registry/deno.json \
        supabase/functions/registry/index.ts

Deno's npm downloads are cached in .kiwi/deno (git-ignored): the first run fetches the MCP SDK
and postgres.js from the npm registry, later runs start in about a second.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from psycopg.types.json import Jsonb

from runner.testing.http_serving import stop
from tests.conftest import runner_url

pytestmark = pytest.mark.slow  # the edge function on Deno

ROOT = Path(__file__).resolve().parent.parent
FUNCTION = ROOT / "supabase" / "functions" / "registry"
DENO = ROOT / "node_modules" / ".bin" / "deno"
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
DENO_DIR = ROOT / ".kiwi" / "deno"
START_TIMEOUT_S = 300  # the first start downloads the npm packages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def edge_function(database: dict[str, str], log: Path) -> Iterator[str]:
    """The function on a free port, its login given by `database` (KIWI_EDGE_DATABASE_URL or
    KIWI_DATABASE_URL); its URL once it answers the health check; always stopped afterwards."""
    if not DENO.exists():  # a failure, not a skip: CI installs Deno from package.json
        pytest.fail(f"Deno is not installed ({DENO}); run `npm install` (package.json pins it)")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("SUPABASE_DB_URL", "KIWI_DATABASE_URL")},
        **database,
        "PORT": str(port),
        "DENO_DIR": str(DENO_DIR),
        "NO_COLOR": "1",
        "DENO_NO_UPDATE_CHECK": "1",
    }
    cmd = [str(DENO), "run", "--allow-net", "--allow-env", "--allow-read", "--config", str(FUNCTION / "deno.json")]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*cmd, str(FUNCTION / "index.ts")], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/registry"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:  # a plain GET is the health check
                    assert json.load(resp)["name"] == "kiwi-registry"
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the edge function did not start (exit {proc.poll()}):\n{log.read_text()[-4000:]}")
                time.sleep(0.1)
        yield url
    finally:
        stop(proc, timeout_s=10)


@pytest.fixture(scope="module")
def edge_url(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The function against the test database through the runner's login (the local default's
    login; never the superuser's, which it refuses)."""
    log = tmp_path_factory.mktemp("edge") / "deno.log"
    with edge_function({"KIWI_DATABASE_URL": runner_url(database_url)}, log) as url:
        yield url


# --- the MCP Inspector CLI ---------------------------------------------------------------


def inspector(url: str, *args: str) -> tuple[int, Any, str]:
    proc = subprocess.run(
        [str(INSPECTOR), "--cli", url, "--transport", "http", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        out, _ = json.JSONDecoder().raw_decode(proc.stdout.lstrip())
    except ValueError:
        pytest.fail(f"the Inspector printed no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, out, proc.stderr


def test_the_inspector_lists_search_load_and_resolve(edge_url: str) -> None:
    code, out, err = inspector(edge_url, "--method", "tools/list")
    assert code == 0, err
    assert {t["name"] for t in out["tools"]} == {"search", "load", "resolve"}


def test_the_inspector_searches(edge_url: str) -> None:
    code, out, err = inspector(edge_url, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=hello")
    assert code == 0, err
    assert out.get("isError") is not True  # the Inspector prints isError only when set
    assert "hello_world" in [i["tool_id"] for i in out["structuredContent"]["items"]]
    assert "hello_world" in out["content"][0]["text"]


def test_the_inspector_sees_an_unknown_tool_as_a_tool_error(edge_url: str) -> None:
    code, out, _ = inspector(
        edge_url, "--method", "tools/call", "--tool-name", "load", "--tool-arg", "tool_id=no_such_tool_zz"
    )
    assert code == 5  # the Inspector's exit code for a result with isError
    assert out["isError"] is True and "no_such_tool_zz" in out["content"][0]["text"]


# --- the Python SDK's streamable HTTP client ----------------------------------------------


@asynccontextmanager
async def session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


async def call(s: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await s.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # the text is the same JSON
    return result.structured_content


async def error_text(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def test_the_sdk_lists_the_tools_as_read_only(edge_url: str) -> None:
    async with session(edge_url) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == {"search", "load", "resolve"}
    assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())
    assert tools["search"].input_schema["required"] == ["query"]


async def test_search_finds_hello_world_and_honours_its_filters(edge_url: str) -> None:
    async with session(edge_url) as s:
        found = await call(s, "search", query="hello")
        runtimes = await call(s, "search", query="bash", tool_type="runtime", limit=1)
        too_many = await error_text(s, "search", query="hello", limit=1000)
    hello = next(i for i in found["items"] if i["tool_id"] == "hello_world")
    assert (hello["tool_type"], hello["executor_id"], hello["latest_version"]) == ("script", "bash_runtime", "1.0.0")
    # no query embedding at the edge: search_tools answers by words, and says so once
    assert hello["matched_by"] == "words" and "search_mode" not in hello
    assert found["search_mode"] == "lexical: no query embedding given"
    assert runtimes["count"] == 1 and runtimes["items"][0]["tool_type"] == "runtime"
    assert "limit" in too_many


async def test_load_returns_hello_worlds_files_as_the_database_holds_them(
    edge_url: str, conn: psycopg.Connection
) -> None:
    async with session(edge_url) as s:
        loaded = await call(s, "load", tool_id="hello_world")
    rows = conn.execute(
        """select f.path, f.sha256, f.size_bytes, f.is_entrypoint, f.media_type, f.content_text, v.content_hash
             from tools t join tool_versions v on v.tool_uuid = t.id and v.is_latest
             join tool_version_files f on f.version_id = v.id
            where t.ref = 'hello_world' order by f.path"""
    ).fetchall()
    assert [
        (f["path"], f["sha256"], f["size_bytes"], f["is_entrypoint"], f["media_type"]) for f in loaded["files"]
    ] == [r[:5] for r in rows]
    for f in loaded["files"]:  # and the text is the text those hashes cover
        assert hashlib.sha256(f["content_text"].encode()).hexdigest() == f["sha256"]
    assert (loaded["tool_id"], loaded["version"], loaded["content_hash"]) == ("hello_world", "1.0.0", rows[0][6])
    assert loaded["manifest"]["executor"] == "bash_runtime" and "tool_id: hello_world" in loaded["manifest_yaml"]
    # Other tests may sign hello_world meanwhile: the state must only agree with its fingerprints.
    sig = loaded["signature"]
    assert sig["state"] == ("signed" if sig["key_fingerprints"] else "unsigned")


def fake_signature(conn: psycopg.Connection, ref: str) -> str:
    """Sign a version as the admin. The registry keeps signatures without checking the Ed25519
    maths (the client verifies), so well-formed bytes do; returns the key's fingerprint."""
    key = uuid.uuid4().bytes * 2  # 32 bytes
    conn.execute(
        "select sign_tool_version(%s, '1.0.0', (select content_hash from tool_versions v join tools t"
        " on t.id = v.tool_uuid where t.ref = %s and v.is_latest), %s, %s)",
        (ref, ref, base64.b64encode(key).decode(), base64.b64encode(key * 2).decode()),
    )
    return hashlib.sha256(key).hexdigest()


async def test_load_reports_unsigned_and_signed_versions(edge_url: str, publish_tool, conn: psycopg.Connection) -> None:
    manifest = {"tool_type": "script", "executor": "bash_runtime", "description": "edge function signatures"}
    unsigned = publish_tool("edge_unsigned", manifest, {"run.sh": "echo hi\n"}, entrypoint="run.sh")
    signed = publish_tool("edge_signed", manifest, {"run.sh": "echo hi\n"}, entrypoint="run.sh")
    fingerprint = fake_signature(conn, signed)
    conn.execute(
        "select publish_tool_version(%s, %s)",
        (Jsonb({**manifest, "tool_id": signed, "version": "1.1.0"}), Jsonb([{"path": "run.sh", "content_text": "x"}])),
    )
    async with session(edge_url) as s:
        a = await call(s, "load", tool_id=unsigned)
        b_old = await call(s, "load", tool_id=signed, version="1.0.0")  # not the latest: read directly
        b_new = await call(s, "load", tool_id=f"{signed}@1.1.0")
    assert a["signature"] == {"state": "unsigned", "key_fingerprints": [], "signatures": []}
    assert (b_old["signature"]["state"], b_old["signature"]["key_fingerprints"]) == ("signed", [fingerprint])
    assert b_old["is_latest"] is False and b_old["signature"]["signatures"][0]["content_hash"] == b_old["content_hash"]
    assert (b_new["version"], b_new["signature"]["state"]) == ("1.1.0", "unsigned")


async def test_resolve_gives_hello_worlds_chain_down_to_its_primitive(edge_url: str) -> None:
    async with session(edge_url) as s:
        resolved = await call(s, "resolve", tool_id="hello_world")
        with_manifests = await call(s, "resolve", tool_id="hello_world", include_manifest=True)
    chain = resolved["chain"]
    assert [(r["depth"], r["tool_id"], r["tool_type"]) for r in chain] == [
        (0, "hello_world", "script"),
        (1, "bash_runtime", "runtime"),
        (2, "subprocess", "primitive"),
    ]
    assert [r["executor_id"] for r in chain] == ["bash_runtime", "subprocess", None]
    assert all(len(r["content_hash"]) == 64 and "manifest" not in r for r in chain)
    assert with_manifests["chain"][0]["manifest"]["tool_id"] == "hello_world"


async def test_unknown_tools_and_versions_are_tool_errors_naming_them(edge_url: str) -> None:
    async with session(edge_url) as s:
        for tool in ("load", "resolve"):
            assert "no_such_tool_zz" in await error_text(s, tool, tool_id="no_such_tool_zz")
        assert "9.9.9" in await error_text(s, "load", tool_id="hello_world", version="9.9.9")
        assert "tool_id" in await error_text(s, "load", version="1.0.0")  # a required argument missing
        # and the endpoint still answers afterwards
        assert (await call(s, "resolve", tool_id="subprocess"))["chain"][0]["tool_type"] == "primitive"


@pytest.fixture
def private_tool(conn: psycopg.Connection) -> Iterator[str]:
    """A private tool in a namespace of its own, published as the admin; removed afterwards."""
    ns = f"edge-{uuid.uuid4().hex[:8]}"
    ref = f"{ns}/secret_{uuid.uuid4().hex[:8]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, uuid.uuid4()))
    try:
        manifest = {
            "tool_id": ref,
            "tool_type": "script",
            "executor": "bash_runtime",
            "version": "1.0.0",
            "visibility": "private",
            "description": "edgesecretword private tool",
        }
        conn.execute(
            "select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb([{"path": "a.sh", "content_text": "x"}]))
        )
        yield ref
    finally:
        conn.execute("delete from tools where namespace = %s", (ns,))
        conn.execute("delete from namespaces where namespace = %s", (ns,))


async def test_a_private_tool_is_not_visible_through_the_function(
    edge_url: str, private_tool: str, conn: psycopg.Connection
) -> None:
    assert conn.execute("select count(*) from search_tools('edgesecretword')").fetchone()[0] == 1  # the admin sees it
    async with session(edge_url) as s:
        assert (await call(s, "search", query="edgesecretword"))["items"] == []
        assert "not found" in await error_text(s, "load", tool_id=private_tool)
        assert private_tool in await error_text(s, "resolve", tool_id=private_tool)


def test_the_functions_own_deno_tests_pass() -> None:
    """supabase/functions/registry/*_test.ts: the pieces that need no database."""
    if not DENO.exists():
        pytest.fail(f"Deno is not installed ({DENO}); run `npm install` (package.json pins it)")
    env = {**os.environ, "DENO_DIR": str(DENO_DIR), "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1"}
    proc = subprocess.run(
        [str(DENO), "test", "--allow-env", "--config", str(FUNCTION / "deno.json"), str(FUNCTION)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def unlisted_tool(conn: psycopg.Connection) -> Iterator[str]:
    """An unlisted tool of the public namespace, published as the admin; removed afterwards."""
    ref = f"unlisted_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": ref,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "visibility": "unlisted",
        "entrypoint": "a.sh",
        "description": "edgeunlistedword tool",
    }
    conn.execute(
        "select publish_tool_version(%s, %s)",
        (Jsonb(manifest), Jsonb([{"path": "a.sh", "content_text": "echo hi", "is_entrypoint": True}])),
    )
    try:
        yield ref
    finally:
        conn.execute("delete from tools where ref = %s", (ref,))


async def test_an_unlisted_tool_is_never_listed_and_always_loads_by_its_exact_reference(
    edge_url: str, unlisted_tool: str
) -> None:
    """Regression (issue 13): load read the tables, which never list unlisted tools, so an
    unlisted tool resolved through the function but did not load. One rule now, in SQL:
    never listed, readable by exact reference, through every call."""
    async with session(edge_url) as s:
        assert (await call(s, "search", query="edgeunlistedword"))["items"] == []
        loaded = await call(s, "load", tool_id=unlisted_tool)
        assert loaded["tool_id"] == unlisted_tool and [f["path"] for f in loaded["files"]] == ["a.sh"]
        assert loaded["is_latest"] is True and loaded["signature"]["state"] == "unsigned"
        resolved = await call(s, "resolve", tool_id=unlisted_tool)
        assert resolved["chain"][0]["content_hash"] == loaded["content_hash"]
