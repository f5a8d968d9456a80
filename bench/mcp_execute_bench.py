"""Kiwi's MCP `execute`: what an agent's tool call costs beside a bare spawn of the same script.

  stdio   `execute run hello_world` through the official SDK client over stdio to
          `python -m runner.cli.serve --transport stdio`, warm, one call at a time,
          interleaved (alternating which goes first) with
  bare    spawning hello_world's script directly (bash, the same stdin JSON, argv,
          environment and working directory the runner gives it, in the same sandbox as
          the server's runs when the sandbox is on: a cgroup per spawn, as there): what a
          call costs without Kiwi. This process ran hello_world through a Runner first, so its asyncio
          sees children exit through pidfds as the server's does (runner/primitives/childwatch.py):
          the baseline is the cheaper one, not a thread per child.
          Target: median(stdio) / median(bare) <= 1.5, judged on the median of --rounds rounds
          (each round's ratio is printed: their range is the noise of a shared machine).

  http    `kiwi serve --transport http` with a user's bearer token, --sessions concurrent
          SDK sessions (each its own HTTP client) calling `execute run hello_world` in a
          loop: calls/s, median and p99 latency. Beside it, in the same run: the same
          number of concurrent bare spawns (the machine's ceiling for the script itself),
          and `search` through the same server. Target: execute's calls/s >= 0.6x the bare
          spawns' (and, as before, >= 400 calls/s, shown). Beside each, the CPU
          per call of the server process (its children not counted) and of this client
          process, and what one core could serve at the server's CPU per call.

  processes  the same `execute` loop (and `search`) against `kiwi serve --transport http
          --processes N` for N in --processes (1, 2, 4): calls/s with each N and its ratio
          against 1 process, measured in the same run, and how many of the N processes
          answered (the request log's pids). The sessions' connections are spread over the
          processes by the kernel (SO_REUSEPORT); on a machine with C cores, expect the ratio
          to level off near C (less what the scripts, Postgres and the client take).

The audit row and the run record of every call are written behind the reply; each block
ends by waiting until the server has written them (their rows are counted in Postgres), so
one block's writes are not charged to the next. Needs the local stack (or KIWI_DATABASE_URL).

Run:  .venv/bin/python bench/mcp_execute_bench.py [--reps 300] [--rounds 3] [--sessions 20] [--calls 2000]
          [--only stdio,http,processes] [--processes 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import Verdict, git_commit, summary, table  # noqa: E402
from runner_bench import DirectSpawn, direct_spawn  # noqa: E402

from runner import PostgresRegistry, Runner, Settings, local_owner  # noqa: E402
from runner.config import stack_database_url  # noqa: E402
from runner.testing.http_serving import kiwi_http_server, mcp_client, serve_env, user_token  # noqa: E402

HELLO = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
EXPECTED = {"greeting": "Hello, Ada!"}
WARMUP = 30


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{pct(values, 0.95):.2f}]"


def checked(result: Any) -> Any:
    if result.is_error or (result.structured_content or {}).get("output") != EXPECTED:
        raise SystemExit(f"execute failed during the bench: {result.content}")
    return result


class RowCount:
    """Counts the rows the server wrote (audit rows of this bench's sessions), to wait for them."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], started: str) -> None:
        self._conn, self._started = conn, started

    async def audits(self) -> int:
        cur = await self._conn.execute(
            "select count(*) from public.audit_log where tool_id = 'hello_world' and at >= %s::timestamptz",
            (self._started,),
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def settle(self, expected: int, timeout_s: float = 60.0) -> float:
        """Wait until `expected` audit rows are written; return the seconds it took."""
        t0 = time.perf_counter()
        while await self.audits() < expected:
            if time.perf_counter() - t0 > timeout_s:
                raise SystemExit(f"the server wrote {await self.audits()} of {expected} audit rows in {timeout_s} s")
            await asyncio.sleep(0.01)
        return time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# stdio: one call at a time against a bare spawn
# --------------------------------------------------------------------------------------


async def measure_stdio(
    url: str, cache: Path, bare_spawn: DirectSpawn, reps: int, rows: RowCount, rounds: int = 1
) -> list[dict[str, list[float]]]:
    """`rounds` rounds of `reps` interleaved pairs on one server: each round's latencies (ms)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio"],
        env=serve_env(url, cache),
        cwd=str(ROOT),
    )
    out: list[dict[str, list[float]]] = []
    async with Client(params) as client:
        server_pid = _child_pid("runner.cli.serve")

        async def execute() -> float:
            t0 = time.perf_counter_ns()
            checked(await client.call_tool("execute", HELLO))
            return (time.perf_counter_ns() - t0) / 1e6

        async def bare() -> float:
            t0 = time.perf_counter_ns()
            await bare_spawn()
            return (time.perf_counter_ns() - t0) / 1e6

        for _ in range(WARMUP):
            await execute()
            await bare()
        done = await rows.audits()
        for _ in range(rounds):
            times: dict[str, list[float]] = {"stdio": [], "bare": [], "server_cpu_ms": []}
            cpu0 = process_cpu_s(server_pid)
            for block in range(0, reps, 50):  # blocks of 50 pairs; the server's writes settle between blocks
                for i in range(block, min(block + 50, reps)):
                    first, second = (execute, bare) if i % 2 == 0 else (bare, execute)
                    a, b = await first(), await second()
                    times["stdio" if first is execute else "bare"].append(a)
                    times["bare" if first is execute else "stdio"].append(b)
                done += min(block + 50, reps) - block
                await rows.settle(done)
            # the server's CPU per execute, its writes behind the replies included (the bare spawns are ours)
            times["server_cpu_ms"].append((process_cpu_s(server_pid) - cpu0) * 1000 / reps)
            out.append(times)
    return out


# --------------------------------------------------------------------------------------
# http: concurrent sessions
# --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sessions(endpoint: str, token: str, n: int) -> AsyncIterator[list[Client]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(mcp_client(endpoint, token)) for _ in range(n)]


async def saturate(workers: list[Callable[[], Awaitable[Any]]], total: int) -> tuple[float, list[float]]:
    """`total` calls spread over the workers, each calling in a loop: calls/s and latencies (ms)."""
    left = total
    latencies: list[float] = []

    async def loop(call: Callable[[], Awaitable[Any]]) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            t0 = time.perf_counter_ns()
            await call()
            latencies.append((time.perf_counter_ns() - t0) / 1e6)

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in workers))
    return total / (time.perf_counter() - t0), latencies


def _child_pid(needle: str) -> int:
    """The pid of this process's child whose command line holds `needle` (the stdio server)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and needle in command:
            return int(entry.name)
    raise SystemExit(f"no child process running {needle}")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) one process has used, its children not counted."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure_http(
    endpoint: str, server_pid: int, bare_spawn: DirectSpawn, n: int, calls: int, rounds: int, rows: RowCount
) -> tuple[dict[str, list[tuple[float, list[float]]]], dict[str, list[tuple[float, float]]]]:
    """Each kind's rounds (calls/s, latencies), and CPU ms per call of each round: the server
    process's own (its children, the spawned scripts, not counted; its writes behind the
    replies included) and this client process's (the SDK sessions; for bare, the spawning)."""
    token = user_token(expires_in_s=3600)
    out: dict[str, list[tuple[float, list[float]]]] = {"execute": [], "bare": [], "search": []}
    cpu: dict[str, list[tuple[float, float]]] = {k: [] for k in out}
    async with sessions(endpoint, token, n) as clients:

        def execute(c: Client) -> Callable[[], Awaitable[Any]]:
            return lambda: c.call_tool("execute", HELLO)

        def search(c: Client) -> Callable[[], Awaitable[Any]]:
            return lambda: c.call_tool("search", {"query": "hello"})

        kinds: dict[str, list[Callable[[], Awaitable[Any]]]] = {
            "execute": [execute(c) for c in clients],
            "bare": [bare_spawn for _ in clients],
            "search": [search(c) for c in clients],
        }
        for c in clients:
            checked(await c.call_tool("execute", HELLO))
        await saturate(kinds["execute"], max(calls // 4, n))
        await saturate(kinds["search"], max(calls // 4, n))
        done = await rows.audits()
        await rows.settle(done)
        for r in range(rounds):
            for name, workers in kinds.items():
                server0, client0 = process_cpu_s(server_pid), time.process_time()
                rate, lat = await saturate(workers, calls)
                client_ms = (time.process_time() - client0) * 1000 / calls
                settle_s = 0.0
                if name == "execute":
                    done += calls
                    settle_s = await rows.settle(done)
                cpu[name].append(((process_cpu_s(server_pid) - server0) * 1000 / calls, client_ms))
                _log(f"[bench] http round {r + 1}/{rounds} {name}: {rate:,.0f} calls/s (writes: {settle_s:.2f} s)")
                out[name].append((rate, lat))
    return out, cpu


# --------------------------------------------------------------------------------------
# processes: the same loop against 1, 2 and 4 server processes
# --------------------------------------------------------------------------------------


async def measure_processes(args: argparse.Namespace, workdir: Path, rows: RowCount) -> dict[int, dict[str, Any]]:
    """For each N: the rounds' calls/s of execute and of search, and how many processes answered."""
    token = user_token(expires_in_s=3600)
    out: dict[int, dict[str, Any]] = {}
    for n in args.processes:
        flags = ["--processes", str(n)] if n > 1 else []
        with kiwi_http_server(args.url, workdir / f"processes-{n}", *flags) as served:
            async with sessions(served.url, token, args.sessions) as clients:
                kinds: dict[str, list[Callable[[], Awaitable[Any]]]] = {
                    "execute": [_calling(c, "execute", HELLO) for c in clients],
                    "search": [_calling(c, "search", {"query": "hello"}) for c in clients],
                }
                for c in clients:
                    checked(await c.call_tool("execute", HELLO))
                for workers in kinds.values():
                    await saturate(workers, max(args.calls // 4, args.sessions))
                done = await rows.audits()
                await rows.settle(done)
                rates: dict[str, list[float]] = {k: [] for k in kinds}
                for r in range(args.rounds):
                    for name, workers in kinds.items():
                        rate, _ = await saturate(workers, args.calls)
                        if name == "execute":
                            done += args.calls
                            await rows.settle(done)
                        rates[name].append(rate)
                        _log(f"[bench] {n} processes, round {r + 1}/{args.rounds} {name}: {rate:,.0f} calls/s")
            pids = {
                line.get("pid")
                for line in (json.loads(x) for x in served.stderr().splitlines() if x.startswith("{"))
                if line.get("event") == "http_request" and line.get("client") is not None
            }
        out[n] = {**{k: statistics.median(v) for k, v in rates.items()}, "answered": len(pids)}
    return out


def _calling(client: Client, tool: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: client.call_tool(tool, arguments)


def processes_block(args: argparse.Namespace, found: dict[int, dict[str, Any]]) -> tuple[list[str], list[Verdict]]:
    """The table of calls/s against the number of processes, and each N's ratio against 1."""
    base = found[min(found)]
    table_rows = [
        [
            str(n),
            f"{f['answered']}",
            f"{f['execute']:,.0f}",
            f"{f['execute'] / base['execute']:.2f}x",
            f"{f['search']:,.0f}",
            f"{f['search'] / base['search']:.2f}x",
        ]
        for n, f in sorted(found.items())
    ]
    cores = os.cpu_count() or 1
    lines = [
        f"## http, 1 to {max(found)} server processes: {args.sessions} sessions, median of {args.rounds} rounds "
        f"of {args.calls} calls",
        "",
        table(
            ["processes", "answered", "execute calls/s", "vs 1", "search calls/s", "vs 1"],
            table_rows,
        ),
        "",
        f"On {cores} CPUs shared by the server processes, the scripts they spawn, Postgres and the SDK clients"
        " of this bench; the ratios are against 1 process, measured in the same run.",
        "",
    ]
    verdicts = [
        Verdict(f"  {kind} calls/s, {n} processes / 1 process", f[kind] / base[kind], "x", ">=", 1.0, False)
        for kind in ("execute", "search")
        for n, f in sorted(found.items())
        if n != min(found)
    ]
    return lines, verdicts


# --------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------


def median_round(rounds: list[tuple[float, list[float]]]) -> tuple[float, list[float]]:
    ordered = sorted(rounds, key=lambda r: r[0])
    return ordered[len(ordered) // 2]


async def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kiwi-mcp-execute-bench-"))
    cache = workdir / "cache"  # the runner's, the stdio server's and the HTTP server's (kiwi_http_server)
    cache.mkdir()
    try:
        settings = Settings(
            backend="postgres", database_url=args.url, supabase_url=None, supabase_key=None, cache_dir=cache
        )
        # open to the end: the bare spawns use its sandbox (its /etc, its seccomp filter, its cgroups)
        runner = Runner(PostgresRegistry(args.url, principal=local_owner()), settings)
        try:
            return await _measure(args, runner, workdir, cache)
        finally:
            await runner.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _measure(args: argparse.Namespace, runner: Runner, workdir: Path, cache: Path) -> int:
    first = await runner.run("hello_world", {"name": "Ada"})  # materialises its files in the cache
    if first.output != EXPECTED:
        raise SystemExit(f"hello_world did not run: {first.error}")
    bare_spawn = await direct_spawn(runner, "hello_world", {"name": "Ada"})
    conn = await psycopg.AsyncConnection.connect(args.url, autocommit=True)
    # the runner's login inherits nothing: counting the audit rows is service_role's to do
    await conn.execute("set role service_role")
    now = await (await conn.execute("select now()::text")).fetchone()
    if now is None:
        raise SystemExit("select now() answered no row")
    rows = RowCount(conn, now[0])
    lines = [
        "# Kiwi MCP execute: hello_world through the server beside a bare spawn"
        + (" in the same sandbox" if bare_spawn.site is not None else ""),
        "",
        f"- commit {git_commit()}; python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f} at start",
        "",
    ]
    verdicts: list[Verdict] = []
    try:
        if "stdio" in args.only:
            _log(f"[bench] stdio: {args.rounds} rounds of {args.reps} interleaved pairs")
            runs = await measure_stdio(args.url, cache, bare_spawn, args.reps, rows, args.rounds)
            t = {k: [x for r in runs for x in r[k]] for k in ("stdio", "bare")}
            each = sorted(statistics.median(r["stdio"]) / statistics.median(r["bare"]) for r in runs)
            ratio = statistics.median(each)
            server_cpu = sorted(x for r in runs for x in r["server_cpu_ms"])
            lines += [
                f"## stdio, one call at a time (ms, median [p95] of {args.rounds} rounds)",
                "",
                table(["path", "latency"], [["bare spawn", fmt(t["bare"])], ["MCP execute", fmt(t["stdio"])]]),
                "",
                f"execute / bare spawn: {ratio:.2f}x, the median of the rounds' "
                + ", ".join(f"{x:.2f}x" for x in each),
                "",
                f"server CPU per execute (its children not counted, its writes behind the replies "
                f"included): {statistics.median(server_cpu):.2f} ms, rounds "
                + ", ".join(f"{x:.2f}" for x in server_cpu),
                "",
            ]
            verdicts.append(Verdict("MCP execute over stdio / bare spawn, median", ratio, "x", "<=", 1.5))
        if "http" in args.only:
            _log(f"[bench] http: {args.sessions} sessions, {args.calls} calls x {args.rounds} rounds per kind")
            with kiwi_http_server(args.url, workdir) as served:
                h, cpu = await measure_http(
                    served.url, served.pid, bare_spawn, args.sessions, args.calls, args.rounds, rows
                )
            table_rows = []
            for name, label in (("bare", "bare spawns"), ("execute", "MCP execute"), ("search", "MCP search")):
                rate, lat = median_round(h[name])
                med, p99 = statistics.median(lat), pct(lat, 0.99)
                server_ms = statistics.median(c[0] for c in cpu[name])
                client_ms = statistics.median(c[1] for c in cpu[name])
                server = f"{server_ms:.2f}" if name != "bare" else "-"
                table_rows.append([label, f"{rate:,.0f}", f"{med:.1f}", f"{p99:.1f}", server, f"{client_ms:.2f}"])
            ex, bare = median_round(h["execute"])[0], median_round(h["bare"])[0]
            ex_server = statistics.median(c[0] for c in cpu["execute"])
            ex_client = statistics.median(c[1] for c in cpu["execute"])
            cores = os.cpu_count() or 1
            lines += [
                f"## http, {args.sessions} concurrent sessions, median of {args.rounds} rounds of {args.calls}",
                "",
                table(
                    ["path", "calls/s", "median ms", "p99 ms", "server CPU ms/call", "client CPU ms/call"],
                    table_rows,
                ),
                "",
                f"execute / bare spawns (calls/s): {ex / bare:.2f}x",
                "",
                f"CPU per execute: the server {ex_server:.2f} ms (one core serves at most {1000 / ex_server:,.0f}"
                f" calls/s), the SDK clients {ex_client:.2f} ms; on {cores} cores shared by both, at"
                f" most {cores * 1000 / (ex_server + ex_client):,.0f} calls/s before the scripts and"
                " Postgres take their share.",
                "",
            ]
            verdicts.append(
                Verdict(f"MCP execute over http / bare spawns, {args.sessions} sessions", ex / bare, "x", ">=", 0.6)
            )
            verdicts.append(Verdict("  MCP execute over http", ex, "calls/s", ">=", 400, False))
            verdicts.append(Verdict("  bare spawns at the same concurrency", bare, "calls/s", ">=", 400, False))
            verdicts.append(
                Verdict(
                    "  one core's ceiling for the server (1000 / its CPU ms per execute)",
                    1000 / ex_server,
                    "calls/s",
                    ">=",
                    400,
                    False,
                )
            )
        if "processes" in args.only:
            _log(f"[bench] processes: {args.processes}, {args.sessions} sessions, {args.calls} calls a round")
            block, more = processes_block(args, await measure_processes(args, workdir, rows))
            lines += block
            verdicts += more
    finally:
        await conn.close()
    lines += summary(verdicts)
    print("\n".join(lines))
    return 0 if all(v.passed for v in verdicts if v.judged) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default="stdio,http,processes", help="any of stdio, http, processes (default %(default)s)"
    )
    parser.add_argument(
        "--processes", default="1,2,4", help="processes: the server process counts to compare (default %(default)s)"
    )
    parser.add_argument("--reps", type=int, default=300, help="stdio: interleaved pairs a round (default %(default)s)")
    parser.add_argument("--sessions", type=int, default=20, help="http: concurrent sessions (default %(default)s)")
    parser.add_argument("--calls", type=int, default=2000, help="http: calls per round and kind (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of stdio, of http (default %(default)s)")
    parser.add_argument("--url", default=os.environ.get("KIWI_DATABASE_URL") or stack_database_url())
    args = parser.parse_args()
    args.only = {p.strip() for p in args.only.split(",") if p.strip()}
    args.processes = sorted({1, *(int(p) for p in args.processes.split(",") if p.strip())})
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
