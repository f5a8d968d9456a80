"""MCP servers as items (load, call, aliases, proxying) and rug-pull protection (a changed
tool list held for review), through the CLI and Kiwi's MCP server, against real servers."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from ..mcp import PYTHON_READS, stdio_server, unique

SHIFTING = Path(__file__).with_name("shifting_server.py")

ECHO = {
    "name": "echo",
    "description": "Echoes the message",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    "annotations": {"readOnlyHint": True},
}


def write_tools(listing: Path, *tools: dict[str, Any]) -> None:
    listing.write_text(json.dumps(list(tools)))
    listing.chmod(0o644)


@contextmanager
def listing_file() -> Iterator[Path]:
    """A tools.json in a directory of its own that the sandboxed server may read (pytest's
    tmp_path is its owner's alone), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="kiwi-shifting-"))
    folder.chmod(0o755)
    try:
        yield folder / "tools.json"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish_shifting(conn: Any, listing: Path, *, namespace: str = "local", **config: Any) -> str:
    """An mcp_server in `namespace` running shifting_server.py over `listing` (its sandbox
    reads the listing's directory); published as the superuser, as an admin's write."""
    ref = f"{namespace}/{unique('shifting')}"
    manifest = stdio_server(ref, [str(SHIFTING), str(listing)], command=sys.executable)
    manifest["config"]["sandbox"] = {"fs": {"read": [*PYTHON_READS, str(listing.parent)]}}
    manifest["config"].update(config)
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
    return ref


def forget(conn: Any, ref: str) -> None:
    conn.execute("delete from mcp_tool_changes where server = %s", (ref,))
    conn.execute("delete from tools where executor_id = %s", (ref,))
    conn.execute("delete from tools where ref = %s", (ref,))
