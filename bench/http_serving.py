"""`kiwi serve --transport http` as a child process, for the benches that measure it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def runner_url(url: str) -> str:
    """The login `kiwi serve` uses on the local stack (tests/conftest.py's rule)."""
    explicit = os.environ.get("KIWI_RUNNER_DATABASE_URL")
    if explicit:
        return explicit
    return url.replace("//postgres:postgres@", "//kiwi_runner:kiwi_runner@", 1)


def server_env(database_url: str, cache: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Kiwi's or Supabase's variables, plus the server's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    return {**env, "KIWI_DATABASE_URL": database_url, "KIWI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **extra}


@contextlib.contextmanager
def kiwi_http_server(env: dict[str, str], log: Path) -> Iterator[tuple[str, int]]:
    """The server's MCP URL and pid once it serves; stopped (killed after 15 s) when the block ends."""
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli.serve", "--transport", "http", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while "serving MCP at" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"kiwi serve --transport http did not start:\n{log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
