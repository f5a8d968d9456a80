"""Kiwi's MCP server: `search` and `load` through MCP, beside the bare SQL they stand on.

For each case, warm, interleaved, the median [p95] latency in ms of:

  SQL        the registry's SQL on one prepared autocommit psycopg connection acting as the
             server's caller (the local owner: RLS applies), as the server calls it:
             search -> `select * from public.search_tools(...)` with the query's vector
             (embedded before timing, by the model the server uses), so by words and meaning
             as the server searches; a modifier alone or an empty query goes by words;
             load   -> `resolve_executor_chain(...)` then `resolve_execution_plan(...)`
  registry   the same through runner.registry (PostgresRegistry: pool, dict rows)
  MCP mem    call_tool through the SDK's Client on the server in process (no transport)
  MCP stdio  call_tool through the SDK's Client over stdio to `python -m runner.cli.serve`

The server's `load` issues its two SQL calls concurrently on two pooled connections.

Run:  .venv/bin/python bench/mcp_server_bench.py [--reps 300] [--output FILE]
Reads the registry at KIWI_DATABASE_URL (default: the local stack); changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import Verdict, summary  # noqa: E402

from runner import PostgresRegistry, Runner, Settings, build_server, embedder_from_settings, local_owner  # noqa: E402
from runner.config import stack_database_url  # noqa: E402

WARMUP = 30
SEARCHES = ["hello", "type:runtime", "", "bash scrpt"]  # a word, a modifier, empty (by popularity), a typo
LOADS = ["hello_world", "kiwi_tool_authoring"]

Call = Callable[[], Awaitable[Any]]


def median(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def fmt(values: list[float]) -> str:
    return f"{median(values):.3f} [{p95(values):.3f}]"


async def measure(calls: dict[str, Call], reps: int) -> dict[str, list[float]]:
    """Each call `reps` times, interleaved, after a warm-up; ms per call."""
    for _ in range(WARMUP):
        for call in calls.values():
            await call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            t0 = time.perf_counter()
            await call()
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def checked(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(f"the MCP call failed: {result.content}")
    return result


async def run(reps: int, url: str) -> str:
    cache = Path(tempfile.mkdtemp(prefix="kiwi-mcp-bench-"))
    atexit.register(shutil.rmtree, cache, True)  # the bench leaves no cache behind
    settings = Settings(backend="postgres", database_url=url, supabase_url=None, supabase_key=None, cache_dir=cache)
    runner = Runner(PostgresRegistry(url, principal=local_owner()), settings)
    registry = PostgresRegistry(url, principal=local_owner())
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio"],
        env={**os.environ, "KIWI_DATABASE_URL": url, "KIWI_CACHE_DIR": str(cache)},
        cwd=str(ROOT),
    )
    rows: list[list[str]] = []
    ratios: list[tuple[float, float]] = []  # each search case: (MCP mem / SQL, MCP stdio / SQL)
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True, prepare_threshold=0)
    # as the caller the server acts as (the local owner), so RLS filters both sides alike
    owner = local_owner()
    await conn.execute(
        "select set_config('role', %s, false), set_config('request.jwt.claims', %s, false)",
        (owner.role, owner.claims_json),
    )
    try:
        async with Client(build_server(runner)) as mem, Client(stdio) as remote:
            embedder = embedder_from_settings(settings)
            vectors = {q: _vector(embedder, q) for q in SEARCHES}
            model = embedder.model if embedder else None

            async def sql_search(q: str) -> None:
                vector = vectors[q]
                await (
                    await conn.execute(
                        "select * from public.search_tools(%s, %s, %s, %s::int, %s::real[], %s)",
                        (q, None, None, 20, vector, model if vector else None),
                    )
                ).fetchall()

            async def reg_search(q: str) -> None:
                vector = vectors[q]
                await registry.search(q, embedding=vector, model=model if vector else None)

            async def sql_load(ref: str) -> None:
                await (await conn.execute("select * from public.resolve_executor_chain(%s)", (ref,))).fetchall()
                await (await conn.execute("select public.resolve_execution_plan(%s, %s)", (ref, None))).fetchone()

            async def reg_load(ref: str) -> None:
                await asyncio.gather(registry.chain(ref), registry.execution_plan(ref))

            for q in SEARCHES:
                args = {"query": q}
                times = await measure(
                    {
                        "sql": partial(sql_search, q),
                        "registry": partial(reg_search, q),
                        "mem": partial(mem.call_tool, "search", args),
                        "stdio": partial(remote.call_tool, "search", args),
                    },
                    reps,
                )
                checked(await mem.call_tool("search", args))
                rows.append([f"search `{q}`" if q else "search (empty)", *_cells(times)])
                ratios.append(
                    (median(times["mem"]) / median(times["sql"]), median(times["stdio"]) / median(times["sql"]))
                )
            for ref in LOADS:
                args = {"item_id": ref}
                checked(await mem.call_tool("load", args))
                times = await measure(
                    {
                        "sql": partial(sql_load, ref),
                        "registry": partial(reg_load, ref),
                        "mem": partial(mem.call_tool, "load", args),
                        "stdio": partial(remote.call_tool, "load", args),
                    },
                    reps,
                )
                rows.append([f"load `{ref}`", *_cells(times)])
    finally:
        await conn.close()
        await registry.aclose()
        await runner.aclose()

    head = ["call", "SQL", "registry", "MCP mem", "MCP stdio", "mem / SQL", "stdio / SQL"]
    lines = [
        "# Kiwi MCP server: search and load through MCP beside the bare SQL",
        "",
        "Reproduce: `.venv/bin/python bench/mcp_server_bench.py" + (f" --reps {reps}`" if reps != 300 else "`"),
        "",
        f"- python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{reps} interleaved reps per column after {WARMUP} warm-up calls; ms, median [p95]",
        "",
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" for _ in head) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        *summary(_verdicts(ratios)),
    ]
    return "\n".join(lines)


def _verdicts(ratios: list[tuple[float, float]]) -> list[Verdict]:
    """Issue 18's target for search through MCP against its SQL, judged in process (Kiwi's server
    code, no transport); over stdio (the SDK's transport both ways) shown beside it."""
    mem, stdio = [r[0] for r in ratios], [r[1] for r in ratios]
    return [
        Verdict("search through the MCP server in process / SQL, worst case", max(mem), "x", "<=", 1.3),
        Verdict("   median of the cases", statistics.median(mem), "x", "<=", 1.3, judged=False),
        Verdict("   over stdio, worst case", max(stdio), "x", "<=", 1.3, judged=False),
    ]


def _vector(embedder: Any, query: str) -> list[float] | None:
    """The query's vector as the server makes it: its words without modifiers (type:, mcp:, …);
    None when there are none (the server then searches by words)."""
    words = " ".join(w for w in query.split() if ":" not in w)
    return [float(x) for x in embedder.embed([words])[0]] if embedder and words.strip() else None


def _cells(times: dict[str, list[float]]) -> list[str]:
    sql = median(times["sql"])
    return [
        fmt(times["sql"]),
        fmt(times["registry"]),
        fmt(times["mem"]),
        fmt(times["stdio"]),
        f"{median(times['mem']) / sql:.1f}x",
        f"{median(times['stdio']) / sql:.1f}x",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300, help="timed calls per column and case (default 300)")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    url = os.environ.get("KIWI_DATABASE_URL") or stack_database_url()
    text = asyncio.run(run(args.reps, url))
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
