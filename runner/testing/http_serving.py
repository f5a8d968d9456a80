"""`kiwi serve --transport http` as a real process on a free loopback port, and the tokens and
clients that talk to it: the HTTP tests and the benches that measure the server start it here."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runner.config import STACK_RUNNER_LOGIN, STACK_SUPERUSER_LOGIN, stack_database_url
from runner.principal import LOCAL_JWT_SECRET, LOCAL_OWNER_ID, sign

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def stack_url() -> str:
    """The superuser URL of the database the suite or the bench runs on: KIWI_DATABASE_URL, else
    the local stack's on its port (KIWI_DB_PORT, as scripts/stack and kiwi read it)."""
    return os.environ.get("KIWI_DATABASE_URL") or stack_database_url(login=STACK_SUPERUSER_LOGIN)


def runner_url(database_url: str) -> str:
    """The URL `kiwi` logs in with on that database, as a user runs it: the runner's login
    when `database_url` is the stack's superuser URL (KIWI_RUNNER_DATABASE_URL overrides), else
    `database_url` unchanged (a cluster of a test's own has no runner login)."""
    if database_url != stack_url():
        return database_url
    explicit = os.environ.get("KIWI_RUNNER_DATABASE_URL")
    if explicit:
        return explicit
    return database_url.replace(f"//{STACK_SUPERUSER_LOGIN}@", f"//{STACK_RUNNER_LOGIN}@", 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_env(database_url: str, cache_dir: Path, **extra: str) -> dict[str, str]:
    """This environment without the developer's KIWI_/SUPABASE_ settings, on `database_url`
    through the runner's login, as `kiwi serve` logs in by default (runner_url)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    env.update(KIWI_DATABASE_URL=runner_url(database_url), KIWI_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT), **extra)
    return env


@dataclass
class Served:
    url: str  # the /mcp endpoint
    base: str  # http://127.0.0.1:PORT
    log: Path  # the server's stderr
    pid: int  # the server process's
    proc: subprocess.Popen[bytes] | None = None

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def kiwi_http_server(database_url: str, workdir: Path, *args: str, **env: str) -> Iterator[Served]:
    """Start `kiwi serve --transport http` with `args`; wait until it says it serves; always kill it."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / f"serve-{port}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli.serve", "--transport", "http", "--port", str(port), *args],
            cwd=ROOT,
            env=serve_env(database_url, workdir / "cache", **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    served = Served(f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}", log, proc.pid, proc)
    # with --processes N, the supervisor says so once every process serves
    ready = "serving with" if "--processes" in args and args[args.index("--processes") + 1] != "1" else "serving MCP at"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while ready not in served.stderr():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"kiwi serve --transport http did not start:\n{served.stderr()}")
            time.sleep(0.05)
        yield served
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within `timeout_s`; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def user_token(user_id: str = LOCAL_OWNER_ID, *, secret: str = LOCAL_JWT_SECRET, expires_in_s: int = 600) -> str:
    claims = {"sub": user_id, "role": "authenticated", "aud": "authenticated"}
    return sign(claims, secret, expires_in_s=expires_in_s)


@contextlib.contextmanager
def two_tenants(conn: Any, prefix: str) -> Iterator[dict[str, dict[str, str]]]:
    """Users `a` and `b`, each owning a fresh namespace `<prefix><a|b>_<hex>`, with a token each
    ({"id", "ns", "token"}); what they left in the registry is deleted afterwards."""
    made: dict[str, dict[str, str]] = {}
    for name in ("a", "b"):
        uid = str(uuid.uuid4())
        ns = f"{prefix}{name}_{uuid.uuid4().hex[:10]}"
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (ns, uid))
        made[name] = {"id": uid, "ns": ns, "token": user_token(uid)}
    try:
        yield made
    finally:
        for t in made.values():
            conn.execute("delete from approvals where namespace = %s", (t["ns"],))
            conn.execute("delete from approval_policies where pattern like %s", (t["ns"] + "/%",))
            conn.execute("delete from tools where namespace = %s", (t["ns"],))
            conn.execute("delete from namespaces where namespace = %s", (t["ns"],))


def service_role_token(*, secret: str = LOCAL_JWT_SECRET) -> str:
    return sign({"role": "service_role", "iss": "supabase-demo"}, secret, expires_in_s=600)


def unsigned_token(claims: dict[str, Any]) -> str:
    """A JWT with `alg: none` and no signature, as an attacker forges one."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'exp': int(time.time()) + 600, **claims})}."


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Client]:
    """The official SDK client over streamable HTTP, sending `Authorization: Bearer <token>`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30, read=120)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as c,
    ):
        yield c
