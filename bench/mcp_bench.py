"""MCP proxy benchmark: `echo` on server-everything (stdio), through Kiwi and directly.

  proxied  Runner.run("everything_mcp.<bench tool>") with a warm pool: the plan (from
           the registry's plan cache), parameter validation, the mcp handler, the
           pooled ClientSession, the run record.
  direct   ClientSession.call_tool("echo") of the same SDK on its own stdio session to
           the same server command.

Target: median(proxied) / median(direct) <= 1.5. Calls run in blocks of 100 of one kind,
the kinds interleaved block by block (alternating which goes first), warm-ups excluded.
Run records are written behind the runs, on the same loop; the records still queued at
the end of a block are flushed before the next block starts, so that one kind's writes
are not charged to the next, and the flush's time is added to its own block's calls,
spread evenly over them (a block without records flushes nothing). The first, connecting
call of each side (spawn, MCP initialize, call) is reported apart, as are the handler
alone (Kiwi's MCP code without the runner) and Runner.run without run records, for
context.

The bench publishes one throwaway mcp_tool on the seeded everything_mcp server and
deletes it at the end. Needs the local stack (`scripts/stack up`) and node_modules.

Run:  .venv/bin/python bench/mcp_bench.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from report import Verdict, record  # noqa: E402

from runner import Invocation, McpPool, PostgresRegistry, Runner, Settings, local_owner, standard_dispatcher  # noqa: E402
from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url  # noqa: E402
from runner.handlers.mcp_tool import McpToolHandler  # noqa: E402
from runner.mcp_client.servers import server_spec  # noqa: E402

DEFAULT_URL = stack_database_url(login=STACK_SUPERUSER_LOGIN)
SERVER = "everything_mcp"
TARGET = 1.5
ARGS = {"message": "hi"}
BLOCK = 100  # calls of one kind in a row; kinds alternate by block


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{statistics.median(values):.3f} [{p95:.3f}]"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)])


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


def make_runner(url: str, cache: Path, *, record: bool) -> tuple[Runner, McpToolHandler]:
    dispatcher = standard_dispatcher(mcp_pool=McpPool())
    (handler,) = [h for h in dispatcher.handlers if isinstance(h, McpToolHandler)]
    settings = Settings(backend="postgres", database_url=url, supabase_url=None, supabase_key=None, cache_dir=cache)
    settings = dataclasses.replace(settings, record_runs=record)
    environ = {**os.environ, "KIWI_NODE_MODULES": str(ROOT / "node_modules")}
    return Runner(
        PostgresRegistry(url, principal=local_owner()), settings, dispatcher=dispatcher, environ=environ
    ), handler


async def bench(url: str, calls: int, tool: str, cache: Path) -> list[str]:
    runner, handler = make_runner(url, cache, record=True)
    quiet, _ = make_runner(url, cache, record=False)
    plan = await runner.plan(tool)
    spec = server_spec(plan, runner.environ)
    params = StdioServerParameters(command=spec.argv[0], args=list(spec.argv[1:]), env=dict(spec.env))

    async def proxied() -> None:
        result = await runner.run(tool, ARGS)
        assert result.output == "Echo: hi", result.error

    async def proxied_quiet() -> None:
        assert (await quiet.run(tool, ARGS)).ok

    invocation = Invocation(plan=plan, params=dict(ARGS), environ=runner.environ)

    async def handler_only() -> None:
        assert (await handler.run(invocation)).status == "success"

    with open(os.devnull, "w") as devnull:
        first_direct_started = time.perf_counter()
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("echo", ARGS)
            first_direct = (time.perf_counter() - first_direct_started) * 1000

            async def direct() -> None:
                result = await session.call_tool("echo", ARGS)
                assert not result.is_error

            first_proxied = await timed(proxied)
            await timed(proxied_quiet)
            for _ in range(200):  # warm-up: prepared statements, caches, the JIT-less fast paths
                await direct()
                await proxied()
                await proxied_quiet()
                await handler_only()
            series: dict[str, list[float]] = {"direct": [], "proxied": [], "quiet": [], "handler": []}
            cpu: dict[str, list[float]] = {name: [] for name in series}  # this process's CPU ms per call, by block
            order = [("direct", direct), ("proxied", proxied), ("quiet", proxied_quiet), ("handler", handler_only)]
            for block in range(max(1, calls // BLOCK)):
                for name, fn in order if block % 2 == 0 else order[::-1]:
                    cpu0 = time.process_time()
                    samples = [await timed(fn) for _ in range(BLOCK)]
                    # Run records are written behind the runs on this loop. Those still
                    # queued at the end of a block are written now, so that they are not
                    # charged to the next block, and the time that takes is charged to this
                    # block's runs, spread evenly: every record's write is paid for.
                    flush = await timed(runner.flush_records)
                    series[name].extend(ms + flush / BLOCK for ms in samples)
                    cpu[name].append((time.process_time() - cpu0) * 1000 / BLOCK)
    await runner.aclose()
    await quiet.aclose()

    base = statistics.median(series["direct"])
    cpu_base = statistics.median(cpu["direct"])

    def cpu_cells(name: str) -> list[str]:
        per_call = statistics.median(cpu[name])
        return [f"{per_call:.3f}", f"{per_call / cpu_base:.2f}"]

    rows = [
        ["direct: ClientSession.call_tool", ms(series["direct"]), "1.00", *cpu_cells("direct")],
        [
            "proxied: Runner.run (warm pool)",
            ms(series["proxied"]),
            f"{statistics.median(series['proxied']) / base:.2f}",
            *cpu_cells("proxied"),
        ],
        [
            "  Runner.run, run records off",
            ms(series["quiet"]),
            f"{statistics.median(series['quiet']) / base:.2f}",
            *cpu_cells("quiet"),
        ],
        [
            "  McpToolHandler.run alone",
            ms(series["handler"]),
            f"{statistics.median(series['handler']) / base:.2f}",
            *cpu_cells("handler"),
        ],
        ["first call, direct (spawn + initialize)", f"{first_direct:.1f}", "(apart)", "", ""],
        ["first call, proxied (plan + connect)", f"{first_proxied:.1f}", "(apart)", "", ""],
    ]
    ratio = statistics.median(series["proxied"]) / base
    handler_ratio = statistics.median(series["handler"]) / base
    record(  # for bench/all.py's table; this report prints its own verdict below
        [
            Verdict("proxied / direct echo, median", ratio, "x", "<=", TARGET),
            Verdict("  handler alone / direct, median", handler_ratio, "x", "<=", TARGET, judged=False),
        ]
    )
    summary = [
        ["proxied / direct echo, median", f"{ratio:.2f} x", f"<= {TARGET} x", "PASS" if ratio <= TARGET else "FAIL"],
        ["  handler alone / direct, median", f"{handler_ratio:.2f} x", f"<= {TARGET} x", "(info)"],
    ]
    return [
        f"# Kiwi MCP proxy benchmark ({len(series['direct'])} calls per series, blocks of {BLOCK})",
        "",
        f"- {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; server {' '.join(spec.argv)}",
        "",
        "## Latency (ms, median [p95]) and this process's CPU per call (ms, median of the blocks)",
        "",
        table(["call", "ms", "x direct", "CPU ms", "CPU x direct"], rows),
        "",
        "## Verdict",
        "",
        table(["metric", "figure", "target", "verdict"], summary),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--database-url", default=os.environ.get("KIWI_DATABASE_URL", DEFAULT_URL))
    args = parser.parse_args()
    if shutil.which("node") is None:
        print("node is not on PATH", file=sys.stderr)
        return 2
    tool = f"{SERVER}.bench_echo_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": tool,
        "tool_type": "mcp_tool",
        "executor": SERVER,
        "version": "1.0.0",
        "description": "mcp_bench: echo",
        "config": {"tool": "echo"},
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    }
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
        try:
            with tempfile.TemporaryDirectory() as cache:
                lines = asyncio.run(bench(args.database_url, args.calls, tool, Path(cache)))
        finally:
            conn.execute("delete from tools where ref = %s", (tool,))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
