"""Kiwi's MCP server through an independent client: the MCP Inspector CLI (Node), over stdio.

    mcp-inspector --cli <python> -m runner.cli.serve --transport stdio --method tools/list

The Inspector prints the result as JSON on stdout; a tool result with isError makes it exit 5.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import runner_url

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
SERVER = [sys.executable, "-m", "runner.cli.serve", "--transport", "stdio"]

pytestmark = pytest.mark.skipif(
    not INSPECTOR.exists() or shutil.which("node") is None, reason="the MCP Inspector CLI is not installed (npm ci)"
)


def inspector(database_url: str, cache_dir: Path, *args: str) -> tuple[int, Any, str]:
    """The Inspector's answer, from a server on the suite's database. The Inspector hands the
    server it spawns only a few variables of its own environment (PATH, HOME, ...): the
    database and the cache go by `-e`, or the server would use the default port's stack."""
    settings = {"KIWI_DATABASE_URL": runner_url(database_url), "KIWI_CACHE_DIR": str(cache_dir)}
    passed = [arg for key, value in settings.items() for arg in ("-e", f"{key}={value}")]
    proc = subprocess.run(
        [str(INSPECTOR), "--cli", *passed, *SERVER, *args],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        out, _ = json.JSONDecoder().raw_decode(proc.stdout.lstrip())
    except ValueError:
        pytest.fail(f"the Inspector printed no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, out, proc.stderr


def test_the_inspector_lists_the_four_tools_and_finds_their_schemas_portable(database_url: str, tmp_path: Path) -> None:
    code, out, err = inspector(database_url, tmp_path, "--method", "tools/list", "--strict")
    assert code == 0, err  # --strict exits 6 on a schema portability error
    tools = {t["name"]: t for t in out["tools"]}
    assert set(tools) == {"search", "load", "execute", "help"}
    assert tools["execute"]["inputSchema"]["properties"]["action"]["enum"] == [
        "run",
        "dry_run",
        "create",
        "update",
        "publish",
        "yank",
        "deprecate",
        "delete",
        "import",
        "approve",
        "deny",
        "open_context",
        "rollback",
        "call",
    ]


def test_the_inspector_runs_hello_world(database_url: str, tmp_path: Path) -> None:
    code, out, err = inspector(
        database_url,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "action=run",
        "--tool-arg",
        "item_id=hello_world",
        "--tool-arg",
        'parameters={"name": "Ada"}',
    )
    assert code == 0, err
    assert out["isError"] is False
    assert out["structuredContent"]["status"] == "success"
    assert out["structuredContent"]["output"] == {"greeting": "Hello, Ada!"}
    assert "Hello, Ada!" in out["content"][0]["text"]


def test_the_inspector_searches_with_a_modifier(database_url: str, tmp_path: Path) -> None:
    code, out, err = inspector(
        database_url,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "search",
        "--tool-arg",
        "query=type:runtime",
        "--tool-arg",
        "limit=2",
    )
    assert code == 0, err
    items = out["structuredContent"]["items"]
    assert len(items) == 2 and {i["tool_type"] for i in items} == {"runtime"}


def test_the_inspector_sees_a_failure_as_a_tool_error_with_a_hint(database_url: str, tmp_path: Path) -> None:
    code, out, _ = inspector(
        database_url,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "action=run",
        "--tool-arg",
        "item_id=no_such_tool_zz",
    )
    assert code == 5  # the Inspector's exit code for a result with isError
    assert out["isError"] is True
    assert "not found" in out["content"][0]["text"] and "hint:" in out["content"][0]["text"]


def test_the_inspectors_server_acts_on_the_suites_database(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    """A tool only this database holds is found: before, the server the Inspector spawned never
    saw KIWI_DATABASE_URL, and answered from whatever stack held the default port."""
    tool = publish_tool(
        "inspector_here",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 10}},
        {"run.sh": "#!/bin/bash\necho '{\"here\": true}'\n"},
        entrypoint="run.sh",
    )
    code, out, err = inspector(
        database_url, tmp_path, "--method", "tools/call", "--tool-name", "execute",
        "--tool-arg", "action=run", "--tool-arg", f"item_id={tool}",
    )  # fmt: skip
    assert code == 0, f"{out}\n{err}"
    assert out["structuredContent"]["output"] == {"here": True}
