"""One hostile tenant against another's searches, on one shared `kiwi serve --transport http`.

A real server process on a free loopback port, two signed-in users with tokens of their own:

  attacker  owns a namespace; publishes, over MCP `execute publish`, a script whose parameter
            is `{"type": "string", "pattern": "^(a+)+$"}`, then keeps sending, one request at a
            time: runs of it with values that almost match ("a"*27+"!", "a"*40+"!", ...: bait
            for a backtracking engine), a YAML alias bomb as a manifest to `execute publish`
            (1 KB that expands to tens of MB), and JSON-RPC nested 10,000 deep
  searcher  calls `search` over MCP, first alone, then beside a benign client (another user
            searching one request at a time, for comparison), then while the attacker keeps on

Each client is a process of its own, so that neither's client work is charged to the other.

Target (the issue's): the searcher's median latency under attack within 2x of its median
alone (ratio = under attack / alone, both measured in this run). Every request has a client
timeout (--timeout), and each phase a deadline, so a server that stalls cannot hang the
bench: a search that times out counts at the timeout, and the timeouts are reported. The
server is killed at the end, whatever it is doing; the attacker's namespace is deleted.

The attack phase lasts until every kind of attack was sent --cycles times (and at least
--searches searches were made), or until its deadline.

Run:  .venv/bin/python bench/hostile_bench.py [--searches 40] [--timeout 5] [--phase-s 25] [--cycles 2]
Needs the local stack (`scripts/stack up`): KIWI_DATABASE_URL (superuser) and the runner's login.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import Verdict, git_commit, summary  # noqa: E402

from runner.testing.http_serving import kiwi_http_server, stack_url, two_tenants  # noqa: E402

TARGET = 2.0
EVIL = "^(a+)+$"
BAIT = ["a" * 27 + "!", "a" * 40 + "!", "a" * 64 + "!", "a" * 4000 + "!"]
QUERIES = ["hello", "format bytes", "bash script", "type:runtime"]
PROTOCOL = "2025-11-25"
BENIGN = "-"  # the attacker process's tool argument for a benign client
ACCEPT = "application/json, text/event-stream"


def alias_bomb(levels: int = 7, width: int = 9) -> str:
    """Under 1 KB of YAML whose aliases stand for width**levels strings: 9**7, 4.8 million,
    about 30 MB once expanded to JSON, if the server expands it."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines.append(f"tool_id: bomb\ntool_type: knowledge\nversion: 1.0.0\ndescription: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def nested_call(depth: int) -> bytes:
    """A tools/call whose argument is nested `depth` lists deep."""
    deep = "[" * depth + "]" * depth
    return (
        '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search",'
        f'"arguments":{{"query":"x","limit":{deep}}}}}}}'
    ).encode()


@dataclass
class Session:
    """One MCP session over raw HTTP, as one user; every request bounded by `timeout`."""

    url: str
    token: str
    timeout: float
    headers: dict[str, str] = field(default_factory=dict)
    client: httpx.AsyncClient | None = None

    async def open(self) -> None:
        self.client = httpx.AsyncClient(timeout=self.timeout)
        base = {"Authorization": f"Bearer {self.token}", "Accept": ACCEPT, "Content-Type": "application/json"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        opened = await self.client.post(self.url, json=init, headers=base)
        opened.raise_for_status()
        self.headers = {**base, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": PROTOCOL}
        await self.client.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )

    async def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(httpx.HTTPError):
                await self.client.delete(self.url, headers=self.headers)
            await self.client.aclose()

    async def post(self, body: bytes) -> httpx.Response:
        assert self.client is not None
        return await self.client.post(self.url, content=body, headers=self.headers)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call's result (raises on an HTTP or JSON-RPC error, or httpx.TimeoutException)."""
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        )
        answer = await self.post(body.encode())
        answer.raise_for_status()
        for line in answer.text.splitlines():
            if line.startswith("data:") and '"id":1' in line:
                message = json.loads(line[5:])
                if "error" in message:
                    raise RuntimeError(message["error"])
                return dict(message["result"])
        return dict(answer.json()["result"])


@dataclass
class Searches:
    latencies_ms: list[float] = field(default_factory=list)
    timeouts: int = 0
    errors: int = 0


async def search_until(
    searcher: Session, count: int, deadline: float, timeout_s: float, until: asyncio.Event | None = None
) -> Searches:
    """At least `count` searches, one at a time (and on until `until` is set, when given), or as
    many as fit before `deadline`; a timed-out one counts at the timeout."""
    done = Searches()
    i = 0
    while time.monotonic() < deadline and (i < count or (until is not None and not until.is_set())):
        started = time.perf_counter()
        try:
            result = await searcher.call("search", {"query": QUERIES[i % len(QUERIES)], "limit": 5})
            if result.get("isError"):
                done.errors += 1
            done.latencies_ms.append((time.perf_counter() - started) * 1000)
        except httpx.TimeoutException:
            done.timeouts += 1
            done.latencies_ms.append(timeout_s * 1000)
        i += 1
    return done


async def attack(attacker: Session, tool: str, stop: asyncio.Event, cycles: int, outcomes: Counter[str]) -> None:
    """Pathological requests, one at a time, until `stop`: each outcome counted by kind; says
    "cycled" on stdout once every kind was sent `cycles` times."""
    kinds: list[tuple[str, Any]] = [(f"run a*{len(v) - 1}+!", v) for v in BAIT]
    kinds += [("publish alias bomb", alias_bomb()), ("JSON nested 10,000 deep", nested_call(10_000))]
    if tool == BENIGN:  # the same pace of ordinary requests, for comparison
        kinds = [("search (a benign client)", q) for q in QUERIES]
    i = 0
    while not stop.is_set():
        if i == cycles * len(kinds):
            print("cycled", flush=True)
        kind, payload = kinds[i % len(kinds)]
        i += 1
        try:
            if tool == BENIGN:
                result = await attacker.call("search", {"query": payload, "limit": 5})
                outcomes[f"{kind}: {'error' if result.get('isError') else 'answered'}"] += 1
            elif kind.startswith("run"):
                result = await attacker.call(
                    "execute", {"action": "run", "item_id": tool, "parameters": {"x": payload}}
                )
                outcomes[f"{kind}: {'refused' if result.get('isError') else 'ran'}"] += 1
            elif kind.startswith("publish"):
                result = await attacker.call("execute", {"action": "publish", "manifest": payload})
                outcomes[f"{kind}: {'refused' if result.get('isError') else 'accepted'}"] += 1
            else:
                outcomes[f"{kind}: HTTP {(await attacker.post(payload)).status_code}"] += 1
        except httpx.TimeoutException:
            outcomes[f"{kind}: client timeout"] += 1
        except (httpx.HTTPError, RuntimeError) as e:
            outcomes[f"{kind}: {type(e).__name__}"] += 1


async def attacker_process(endpoint: str, bearer: str, tool: str, timeout: float, cycles: int) -> None:
    """The attacker as a process of its own (its client work is not charged to the searcher's
    event loop): attacks until its stdin closes, then prints its outcomes as JSON."""
    attacker = Session(endpoint, bearer, timeout)
    await attacker.open()
    stop, outcomes = asyncio.Event(), Counter[str]()
    attacking = asyncio.create_task(attack(attacker, tool, stop, cycles, outcomes))
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(attacking, timeout + 1)
    print("outcomes " + json.dumps(outcomes), flush=True)
    with contextlib.suppress(Exception):  # a stalled server: the session is not worth waiting for
        await asyncio.wait_for(attacker.close(), 1)


async def publish_evil(attacker: Session, ns: str) -> str:
    tool = f"{ns}/redos"
    manifest = {
        "tool_id": tool,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "entrypoint": "run.sh",
        "description": "a parameter with a backtracking pattern",
        "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}, "required": ["x"]},
    }
    files = [{"path": "run.sh", "content_text": "echo ok\n", "is_entrypoint": True}]
    result = await attacker.call("execute", {"action": "publish", "manifest": manifest, "files": files})
    if result.get("isError"):
        raise SystemExit(f"publishing the attacker's tool failed: {result['content']}")
    return tool


async def under_attack(
    searcher: Session, endpoint: str, bearer: str, tool: str, args: argparse.Namespace, outcomes: Counter[str]
) -> Searches:
    """Searches while the attacker process attacks (until it has cycled, or the deadline)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--attacker", endpoint, bearer, tool, "--timeout", str(args.timeout),
        "--cycles", str(args.cycles), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    cycled = asyncio.Event()

    async def read() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode().strip()
            if line == "cycled":
                cycled.set()
            elif line.startswith("outcomes "):
                outcomes.update(json.loads(line.removeprefix("outcomes ")))

    reading = asyncio.create_task(read())
    try:
        await asyncio.sleep(0.5)  # the attacker's session is open and its first request in
        deadline = time.monotonic() + args.phase_s
        return await search_until(searcher, args.searches, deadline, args.timeout, until=cycled)
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), args.timeout + 10)
            await reading
        except TimeoutError:
            proc.kill()
            await proc.wait()
            reading.cancel()


async def measure(url: str, args: argparse.Namespace) -> tuple[Searches, Searches, Searches, Counter[str]]:
    """Searches alone, beside a benign client, beside the attacker; the attacker's outcomes."""
    with (
        psycopg.connect(url, autocommit=True) as conn,
        tempfile.TemporaryDirectory(prefix="kiwi-hostile-") as tmp,
        two_tenants(conn, "bench_hostile_") as users,  # the attacker a, the searcher b
        kiwi_http_server(url, Path(tmp)) as served,
    ):
        attacker_token = users["a"]["token"]
        publisher = Session(served.url, attacker_token, args.timeout)
        searcher = Session(served.url, users["b"]["token"], args.timeout)
        await publisher.open()
        await searcher.open()
        try:
            tool = await publish_evil(publisher, users["a"]["ns"])
            await search_until(searcher, 10, time.monotonic() + args.phase_s, args.timeout)  # warm-up
            alone = await search_until(searcher, args.searches, time.monotonic() + args.phase_s, args.timeout)
            benign, outcomes = Counter[str](), Counter[str]()
            busy = await under_attack(searcher, served.url, attacker_token, BENIGN, args, benign)
            hostile = await under_attack(searcher, served.url, attacker_token, tool, args, outcomes)
        finally:
            await publisher.close()
            await searcher.close()
    return alone, busy, hostile, outcomes


def report(
    alone: Searches, busy: Searches, hostile: Searches, outcomes: Counter[str], args: argparse.Namespace
) -> list[str]:
    if not alone.latencies_ms or not busy.latencies_ms or not hostile.latencies_ms:
        raise SystemExit("no searches were measured")
    a, h = statistics.median(alone.latencies_ms), statistics.median(hostile.latencies_ms)

    def line(name: str, s: Searches) -> str:
        ms = sorted(s.latencies_ms)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        return (
            f"{name:<20} median {statistics.median(ms):8.1f} ms   p95 {p95:8.1f} ms   max {ms[-1]:8.1f} ms"
            f"   over {len(ms)} ({s.timeouts} timed out, {s.errors} tool errors)"
        )

    lines = [
        f"# A hostile tenant against another's search ({git_commit()}; client timeout {args.timeout:g} s)",
        "",
        line("search alone", alone),
        line("search beside benign", busy),
        line("search under attack", hostile),
        f"ratio of the medians {h / a:8.2f}x (target <= {TARGET:g}x); beside a benign client at the same pace "
        f"{statistics.median(busy.latencies_ms) / a:.2f}x",
        "",
        "the attacker's requests meanwhile:",
        *(f"  {n:5d}  {kind}" for kind, n in sorted(outcomes.items())),
        "",
    ]
    verdicts = [
        Verdict("search median under attack / alone", h / a, "x", "<=", TARGET),
        Verdict("search median alone", a, "ms", "<=", a, judged=False),
        Verdict(
            "search median beside a benign client / alone",
            statistics.median(busy.latencies_ms) / a,
            "x",
            "<=",
            TARGET,
            judged=False,
        ),
        Verdict(
            "search under attack, slowest",
            max(hostile.latencies_ms),
            "ms",
            "<=",
            max(hostile.latencies_ms),
            judged=False,
        ),
        Verdict("searches timed out under attack", hostile.timeouts, "", "<=", max(hostile.timeouts, 1), judged=False),
    ]
    return [*lines, *summary(verdicts)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=40, help="searches per phase (default 40)")
    parser.add_argument("--timeout", type=float, default=5.0, help="each request's client timeout in s (default 5)")
    parser.add_argument("--phase-s", type=float, default=25.0, help="each phase's deadline in s (default 25)")
    parser.add_argument(
        "--cycles",
        type=int,
        default=2,
        help="the attack phase lasts until every attack was sent this often (default 2)",
    )
    parser.add_argument("--attacker", nargs=3, metavar=("ENDPOINT", "TOKEN", "TOOL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attacker:
        endpoint, bearer, tool = args.attacker
        asyncio.run(attacker_process(endpoint, bearer, tool, args.timeout, args.cycles))
        return 0
    url = stack_url()
    alone, busy, hostile, outcomes = asyncio.run(measure(url, args))
    print("\n".join(report(alone, busy, hostile, outcomes, args)))
    return 0 if statistics.median(hostile.latencies_ms) <= TARGET * statistics.median(alone.latencies_ms) else 1


if __name__ == "__main__":
    sys.exit(main())
