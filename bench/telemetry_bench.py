"""What telemetry costs an MCP `execute`: off against on, in the same run.

Three `python -m runner.cli.serve --transport stdio` servers on the same database, each with
the official SDK client, called in turn (`execute run hello_world`, warm, one call at a time,
the order rotated every call so that none is always first):

  baseline  no OTEL_* variable at all;
  off       an exporter named but OTEL_SDK_DISABLED=true: telemetry's code is on the path,
            OpenTelemetry's SDK is not even imported (runner/telemetry);
  on        exporting traces and metrics over OTLP/HTTP to a local receiver in a process of
            its own, as a collector is (runner/testing/otlp_receiver.py), every span of every call.

Targets, on the median of --rounds rounds' median ratios: off / baseline <= 1.03 (nothing
measurable: within the noise of a shared machine) and on / baseline <= 1.10. Beside them, what
one do-nothing span costs in process when telemetry is off.

Run:  .venv/bin/python bench/telemetry_bench.py [--reps 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from report import Verdict, git_commit, summary, table  # noqa: E402

from runner import telemetry  # noqa: E402
from runner.config import stack_database_url  # noqa: E402
from runner.testing.http_serving import serve_env  # noqa: E402

HELLO = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
EXPECTED = {"greeting": "Hello, Ada!"}
WARMUP = 20
KINDS = ("baseline", "off", "on")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _env(kind: str, url: str, cache: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in serve_env(url, cache).items() if not k.startswith("OTEL_")}
    if kind == "off":
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SDK_DISABLED="true")
    elif kind == "on":
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="kiwi-bench")
    return env


async def measure(url: str, workdir: Path, endpoint: str, reps: int, rounds: int) -> list[dict[str, list[float]]]:
    """`rounds` rounds of `reps` calls to each server, in turn: each round's latencies (ms)."""
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for kind in KINDS:
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "runner.cli.serve", "--transport", "stdio"],
                env=_env(kind, url, workdir / kind, endpoint),
                cwd=str(ROOT),
            )
            clients[kind] = await stack.enter_async_context(Client(params))

        async def execute(kind: str) -> float:
            t0 = time.perf_counter_ns()
            result = await clients[kind].call_tool("execute", HELLO)
            if result.is_error or (result.structured_content or {}).get("output") != EXPECTED:
                raise SystemExit(f"execute failed during the bench ({kind}): {result.content}")
            return (time.perf_counter_ns() - t0) / 1e6

        for _ in range(WARMUP):
            for kind in KINDS:
                await execute(kind)
        out = []
        for _ in range(rounds):
            times: dict[str, list[float]] = {k: [] for k in KINDS}
            for i in range(reps):
                for j in range(len(KINDS)):
                    kind = KINDS[(i + j) % len(KINDS)]
                    times[kind].append(await execute(kind))
            out.append(times)
        return out


def span_cost_ns(n: int = 200_000) -> float:
    """One span() block, telemetry off, in this process (ns)."""
    assert not telemetry.started()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with telemetry.span("kiwi.bench", {"kiwi.tool.id": "x"}):
            pass
    return (time.perf_counter_ns() - t0) / n


@contextlib.contextmanager
def collector() -> Iterator[tuple[str, Callable[[], int]]]:
    """The OTLP receiver in a process of its own, as a collector is (in the bench's own process,
    its work would slow the client being timed): its endpoint, and how many spans it got."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.testing.otlp_receiver"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    endpoint = proc.stdout.readline().strip()
    got: list[int] = []

    def count() -> int:
        if not got:
            out, _ = proc.communicate(timeout=30)  # closes its stdin: it says how many spans came
            got.append(int(out.strip() or 0))
        return got[0]

    try:
        yield endpoint, count
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="kiwi-telemetry-bench-") as tmp, collector() as (endpoint, count):
        _log(f"[bench] {args.rounds} rounds of {args.reps} calls to each of {', '.join(KINDS)}")
        runs = await measure(args.url, Path(tmp), endpoint, args.reps, args.rounds)
        await asyncio.sleep(1.0)  # the last batch of spans leaves the "on" server
        exported = count()
    med = {k: [statistics.median(r[k]) for r in runs] for k in KINDS}
    ratio = {k: statistics.median(sorted(m / b for m, b in zip(med[k], med["baseline"], strict=True))) for k in KINDS}
    every = {k: [x for r in runs for x in r[k]] for k in KINDS}
    nanos = span_cost_ns()
    lines = [
        "# Kiwi telemetry: MCP execute over stdio with telemetry off and on",
        "",
        f"- commit {git_commit()}; python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f} at start",
        "",
        f"## execute hello_world, one call at a time (ms, median of {args.rounds} rounds of {args.reps})",
        "",
        table(
            ["server", "median ms", "p95 ms", "/ baseline"],
            [
                [
                    k,
                    f"{statistics.median(every[k]):.2f}",
                    f"{statistics.quantiles(every[k], n=20)[-1]:.2f}",
                    f"{ratio[k]:.3f}",
                ]
                for k in KINDS
            ],
        ),
        "",
        f"The receiver got {exported:,} spans from the `on` server. Off, one span() block costs "
        f"{nanos:.0f} ns in process; a run opens eight.",
        "",
    ]
    verdicts = [
        Verdict("execute, telemetry off / baseline, median", ratio["off"], "x", "<=", 1.03),
        Verdict("execute, telemetry on (OTLP export) / baseline, median", ratio["on"], "x", "<=", 1.10),
        Verdict("  one span() block with telemetry off", nanos, "ns", "<=", 1000, False),
    ]
    lines += summary(verdicts)
    print("\n".join(lines))
    return 0 if all(v.passed for v in verdicts if v.judged) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="calls to each server a round (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default %(default)s)")
    parser.add_argument("--url", default=os.environ.get("KIWI_DATABASE_URL") or stack_database_url())
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
