"""Abandoned MCP sessions and the memory of `kiwi serve --transport http`.

A client that sends `initialize` and never `DELETE` leaves a session behind. This starts a
real server with a short idle timeout (KIWI_SESSION_IDLE_TIMEOUT), opens --sessions of them
(each as its own user, so no per-user cap closes any early; 20 at a time over raw HTTP),
abandons them, and waits until they have expired: the newest one's id answers 404 (the
others are older). The server's resident memory (VmRSS) is read at three points:

  start    after a warm-up (sessions opened and deleted, the code paths loaded)
  peak     with every session open
  after    once they have all expired (the lowest of the readings over the next 10 s: the
           server gives freed memory back a few seconds after sessions end)

Target: `after` within 20 MB of `start` (issue 26: 3,000 abandoned sessions added 101 MB
that was never freed).

Run:  .venv/bin/python bench/sessions_bench.py [--sessions 3000] [--idle 10]
Reads nothing from the registry (initialize only); KIWI_DATABASE_URL as the other benches.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import Verdict, git_commit, summary  # noqa: E402

from runner.testing.http_serving import kiwi_http_server, stack_url, user_token  # noqa: E402

TARGET_MB = 20.0
WARMUP = 200
SETTLE_READINGS = 20  # 10 s: the server trims a few seconds after sessions end
CONCURRENCY = 20
VERSION = "2025-06-18"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "abandoner", "version": "1"}},
}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


def environ_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode(errors="replace").split("=", 1) for p in pairs if b"=" in p)


async def open_sessions(url: str, n: int, *, delete: bool) -> list[tuple[str, str]]:
    """`n` sessions, each its own user's, CONCURRENCY at a time: (token, session id) each;
    deleted again at once when `delete` (the warm-up), else abandoned."""
    opened: list[tuple[str, str]] = []
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=60) as client:

        async def one() -> None:
            async with gate:
                mine = user_token(str(uuid.uuid4()), expires_in_s=3600)
                auth = {**HEADERS, "Authorization": f"Bearer {mine}"}
                response = await client.post(url, json=INITIALIZE, headers=auth)
                response.raise_for_status()
                session = response.headers["mcp-session-id"]
                if delete:
                    await client.delete(url, headers={**auth, "Mcp-Session-Id": session})
                else:
                    opened.append((mine, session))

        await asyncio.gather(*(one() for _ in range(n)))
    return opened


def gone(url: str, mine: str, session: str) -> bool:
    """Whether a session has expired (404). A ping on one still there uses it, so call this
    only once it has been left alone for longer than its idle timeout."""
    headers = {**HEADERS, "Authorization": f"Bearer {mine}", "Mcp-Session-Id": session}
    headers["MCP-Protocol-Version"] = VERSION
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return httpx.post(url, json=ping, headers=headers, timeout=60).status_code == 404


def measure(sessions: int, idle_s: float) -> dict[str, float]:
    """`kiwi serve --transport http` with sessions expiring after `idle_s`: its RSS at each point."""
    with (
        tempfile.TemporaryDirectory(prefix="kiwi-sessions-bench-") as tmp,
        kiwi_http_server(stack_url(), Path(tmp), KIWI_SESSION_IDLE_TIMEOUT=str(idle_s)) as served,
    ):
        url, pid = served.url, served.pid
        asyncio.run(open_sessions(url, WARMUP, delete=True))
        time.sleep(1)
        start = rss_mb(pid)
        began = time.monotonic()
        opened = asyncio.run(open_sessions(url, sessions, delete=False))
        opening_s = time.monotonic() - began
        peak = rss_mb(pid)
        print(f"opened {len(opened)} sessions in {opening_s:.1f} s; RSS {start:.1f} -> {peak:.1f} MB", flush=True)
        began = time.monotonic()
        newest = opened[-1]
        while True:
            time.sleep(idle_s * 1.5)
            if gone(url, *newest):
                break
            if time.monotonic() - began > 60 * idle_s:
                raise SystemExit(f"the sessions did not expire within {60 * idle_s:.0f} s")
        expired_s = time.monotonic() - began
        oldest_gone = gone(url, *opened[0])
        allocator = environ_of(pid).get("PYTHONMALLOC", "pymalloc")
        readings = []  # the server gives memory back a few seconds after sessions end
        for _ in range(SETTLE_READINGS):
            time.sleep(0.5)
            readings.append(rss_mb(pid))
        after = min(readings)
        print(f"all expired {expired_s:.1f} s after the last was opened (oldest gone: {oldest_gone})", flush=True)
        print(f"the server's allocator: PYTHONMALLOC={allocator}; RSS readings {readings}", flush=True)
        return {"start": start, "peak": peak, "after": after, "opening_s": opening_s, "expired_s": expired_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=3000, help="abandoned sessions to open (default 3000)")
    parser.add_argument("--idle", type=float, default=10.0, help="the server's session idle timeout, s (default 10)")
    args = parser.parse_args()
    figures = measure(args.sessions, args.idle)
    grew, kept = figures["peak"] - figures["start"], figures["after"] - figures["start"]
    print(f"\n# Abandoned MCP sessions ({git_commit()})\n")
    print(f"- {args.sessions} sessions opened and abandoned, idle timeout {args.idle:g} s")
    print(f"- RSS at start {figures['start']:.1f} MB, with them open {figures['peak']:.1f} MB (+{grew:.1f} MB)")
    print(f"- RSS once they expired {figures['after']:.1f} MB ({kept:+.1f} MB against the start)\n")
    verdicts = [
        Verdict(f"RSS growth with {args.sessions} sessions open", grew, "MB", "<=", TARGET_MB, judged=False),
        Verdict(f"RSS kept after {args.sessions} abandoned sessions expired", kept, "MB", "<=", TARGET_MB),
    ]
    print("\n".join(summary(verdicts)))
    return 0 if all(v.passed for v in verdicts if v.judged) else 1


if __name__ == "__main__":
    sys.exit(main())
