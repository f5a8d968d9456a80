"""Kiwi runner benchmarks: what the runner adds to a tool run, API throughput, CLI start-up.

Every figure is measured in one run against the local registry (the seeded tools), with
one Runner reused as a host process would, run records on as in production; samples of
a and b are interleaved with their baseline, warm-ups excluded; medians and p95.

  a. `Runner.run("hello_world", {"name": "Ada"})`, warm, against spawning the same
     script directly (`bash <materialised hello.sh>`, the same stdin JSON and
     environment, asyncio.create_subprocess_exec + communicate, same event loop), in the
     same sandbox as the runner's runs when the sandbox is on (a cgroup made and removed
     per spawn, as there): median ratio <= 1.5. The same spawn on the host, unsandboxed,
     is timed beside them (what the sandbox itself costs; the sandbox bench judges that).
  b. `Runner.run("format_bytes", ...)` (Python with a dependency, its environment
     cached) against `<env_dir>/bin/python <materialised format_bytes.py>` with the
     same stdin and environment, likewise: median ratio <= 1.3. The environments are
     built first, once, in the bench's own temporary cache.
  c. `Runner.run("http_echo", ...)` against a local echo server, 50 concurrent tasks
     in this process, the full path (plan lookup, parameters, http_client, run record):
     >= 1,000 calls/s. The server (bench/echo_server.py) runs in its own process;
     its capacity is measured and printed, and so are the http_client primitive alone
     and the plan lookup alone (served from the registry's in-memory plans while the
     database's change notifications are live), with the CPU each process spent per call, so a shortfall
     can be traced to the process that ran out.
  d. `kiwi run hello_world -p name=Ada` as a fresh process: median wall time over the
     runs <= 60 ms (issue 18), printed with its ratio to a bare `python -I -c pass` timed
     in the same run; the floors, `python -I -c pass` and `python -I -c "import psycopg"`
     (the driver alone), stand in the verdict's line, and the runner's imports are timed
     beside them (all interleaved) to show where the time goes. The runner's .pyc files
     are compiled first, as an installed kiwi has them (PYTHONDONTWRITEBYTECODE would
     otherwise leave edited modules compiled again on every start). The cold command runs
     with KIWI_AGENT=off; the same command is also timed warm, handed to a `kiwi agent`
     started for the run (runner/cli/warm.py): its median <= 8x the bare `python -I -c pass`.
  e. the size of the runner's core (plan, materialise, primitives): non-blank,
     non-comment lines per file (docstrings shown apart). No target.

Every run of a, b, c and d leaves its record in tool_runs, as in production. Records
are written behind the runs (runner/harness/recorder.py): in a and b each run's record is
flushed after its timed window, before the next sample; in c the final flush is inside
each round's timed window, so calls/s counts every record written.

Run:  .venv/bin/python bench/runner_bench.py [--only a,b,c,d,e] [--runs 200] [--calls 5000]
A full run (no --only) also writes its report to bench/results/runner.md.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from report import Verdict, git_commit, summary, table  # noqa: E402

from runner import Invocation, Plan, PostgresRegistry, Runner, Settings, local_owner  # noqa: E402
from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url  # noqa: E402
from runner.core.materialize import materialise  # noqa: E402
from runner.harness.environment import prepare_environment  # noqa: E402
from runner.primitives import procfs  # noqa: E402
from runner.primitives.http_client import HttpClientPrimitive  # noqa: E402
from runner.primitives.subprocess import ProcessSpec, build_spec  # noqa: E402
from runner.sandbox.site import ToolSite  # noqa: E402

RESULTS_FILE = ROOT / "bench" / "results" / "runner.md"
DEFAULT_URL = stack_database_url(login=STACK_SUPERUSER_LOGIN)
VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
KIWI = [str(VENV_BIN / "kiwi")] if (VENV_BIN / "kiwi").exists() else [PYTHON, "-m", "runner.cli"]

CORE_FILES = [
    "runner/core/plan.py",
    "runner/harness/run.py",
    "runner/core/materialize.py",
    "runner/core/params.py",
    "runner/core/expand.py",
    "runner/harness/environment.py",
    "runner/harness/validation.py",
    "runner/harness/dispatch.py",
    "runner/core/records.py",
]

HELLO = ("hello_world", {"name": "Ada"}, {"greeting": "Hello, Ada!"})
FORMAT = ("format_bytes", {"bytes": 123456789, "binary": True}, {"bytes": 123456789, "human": "117.7 MiB"})
SPAWN_WARMUP = 10
# What `kiwi run` of a script imports before it does anything (d, for context).
KIWI_IMPORTS = "import runner.cli.main, runner.harness.run, runner.registry.postgres, runner.primitives.subprocess"
CLI_WARMUP = 2


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _mp(values: Sequence[float], digits: int = 2) -> str:
    return f"{median(values):.{digits}f} [{p95(values):.{digits}f}]"


# --------------------------------------------------------------------------------------
# CPU accounting (to tell which process ran out of CPU in c)
# --------------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def postgres_cpu_s() -> float | None:
    """CPU seconds used so far by every process named postgres on this machine (the local
    cluster, with any other client's work on it); None when none is visible."""
    postgres = [p for p in procfs.processes() if p.name == "postgres"]
    return sum(p.utime + p.stime for p in postgres) / _TICK if postgres else None


def machine_busy_s() -> float:
    """CPU seconds all cores spent not idle so far (from /proc/stat)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _TICK  # less idle and iowait


@dataclass
class CpuWindow:
    """CPU spent by each party over one measured stretch, in seconds."""

    wall: float = 0.0
    runner: float = 0.0
    postgres: float | None = None
    server: float | None = None
    machine: float = 0.0


T = TypeVar("T")


class CpuMeter:
    def __init__(self, server_stats: Callable[[], Awaitable[dict[str, float]]] | None) -> None:
        self._server_stats = server_stats

    async def _sample(self) -> tuple[float, float, float | None, float | None, float]:
        server = (await self._server_stats())["cpu_s"] if self._server_stats else None
        return time.perf_counter(), time.process_time(), postgres_cpu_s(), server, machine_busy_s()

    async def measure(self, body: Callable[[], Awaitable[T]]) -> tuple[T, CpuWindow]:
        w0, r0, p0, s0, m0 = await self._sample()
        value = await body()
        w1, r1, p1, s1, m1 = await self._sample()
        return value, CpuWindow(
            wall=w1 - w0,
            runner=r1 - r0,
            postgres=None if p0 is None or p1 is None else p1 - p0,
            server=None if s0 is None or s1 is None else s1 - s0,
            machine=m1 - m0,
        )


# --------------------------------------------------------------------------------------
# The echo server (c)
# --------------------------------------------------------------------------------------


class EchoServer:
    """bench/echo_server.py in its own process, stopped when we close its stdin."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, str(ROOT / "bench" / "echo_server.py"), "--watch-stdin"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.close()
            raise SystemExit(f"the echo server did not start: {line!r}")
        self.url = line.removeprefix("listening on ")
        host, _, port = self.url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)

    async def stats(self) -> dict[str, float]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.write(b"GET /__stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = await reader.read()
        writer.close()
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def raw_load(host: str, port: int, connections: int, total: int) -> float:
    """Requests/s a minimal raw-socket keep-alive client (one request in flight per
    connection) gets from the server: a lower bound of its capacity."""
    body = b'{"message": "hi"}'
    request = (
        b"POST /echo HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    remaining = total

    async def one_connection() -> None:
        nonlocal remaining
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while remaining > 0:
                remaining -= 1
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                await reader.readexactly(length)
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(one_connection() for _ in range(connections)))
    return total / (time.perf_counter() - started)


# --------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------


@dataclass
class SpawnFigures:
    """a or b: interleaved samples of the runner and the direct spawn (ms)."""

    tool: str
    argv: list[str] = field(default_factory=list)
    runner: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)  # in the runner's sandbox, when it is on
    bare: list[float] = field(default_factory=list)  # on the host, unsandboxed (only when the runner's is on)
    sandboxed: bool = False
    plan_rpc: list[float] = field(default_factory=list)  # inside the runner's runs
    record_rpc: list[float] = field(default_factory=list)
    setup_s: float | None = None  # b: building the environment


class TimedRegistry(PostgresRegistry):
    """The runner's registry, with the wall time of its two RPCs noted (to explain a and b)."""

    plan_ms: list[float] | None = None
    record_ms: list[float] | None = None

    async def plan(self, tool_id: str, version: str | None = None) -> Plan:
        t0 = time.perf_counter_ns()
        try:
            return await super().plan(tool_id, version)
        finally:
            if self.plan_ms is not None:
                self.plan_ms.append((time.perf_counter_ns() - t0) / 1e6)

    async def record_runs(self, records: list[dict[str, Any]]) -> list[str]:
        t0 = time.perf_counter_ns()
        try:
            return await super().record_runs(records)
        finally:
            self._recorded(t0)

    async def record_calls(self, runs: list[dict[str, Any]], audits: list[dict[str, Any]]) -> list[str]:
        """A run's record with its audit row, in one round trip (what the recorder sends)."""
        t0 = time.perf_counter_ns()
        try:
            return await super().record_calls(runs, audits)
        finally:
            self._recorded(t0)

    def _recorded(self, t0: int) -> None:
        if self.record_ms is not None:
            self.record_ms.append((time.perf_counter_ns() - t0) / 1e6)


@dataclass
class ThroughputRound:
    what: str
    calls: int
    rate: float  # calls/s
    latency_ms: list[float]
    cpu: CpuWindow

    def per_call_ms(self, seconds: float | None) -> str:
        return "n/a" if seconds is None else f"{seconds / self.calls * 1000:.3f}"


@dataclass
class ThroughputFigures:
    concurrency: int
    server_url: str = ""
    raw_capacity: float = 0.0
    server_cpu_per_request_us: float | None = None
    rounds: list[ThroughputRound] = field(default_factory=list)

    def of(self, what: str) -> list[ThroughputRound]:
        return [r for r in self.rounds if r.what == what]


@dataclass
class CliFigures:
    kiwi: list[float] = field(default_factory=list)
    kiwi_warm: list[float] = field(default_factory=list)  # the same command handed to a running `kiwi agent`
    import_kiwi: list[float] = field(default_factory=list)
    import_psycopg: list[float] = field(default_factory=list)
    python_pass: list[float] = field(default_factory=list)
    command: str = ""


@dataclass
class Figures:
    a: SpawnFigures | None = None
    b: SpawnFigures | None = None
    c: ThroughputFigures | None = None
    d: CliFigures | None = None
    e: list[tuple[str, int, int]] | None = None  # (file, lines, of which docstring lines)
    loop: str = ""


# --------------------------------------------------------------------------------------
# a, b: the runner against a direct spawn of the same script
# --------------------------------------------------------------------------------------


@dataclass
class DirectSpawn:
    """The tool's process as the runner starts it, without the runner: the same argv,
    environment, working directory and stdin, in the same sandbox as the runner's runs (a
    cgroup made and removed per call, as there) when `site` is set, else on the host."""

    spec: ProcessSpec
    site: ToolSite | None = None

    async def __call__(self) -> bytes:
        argv, env, cwd = list(self.spec.argv), dict(self.spec.env), self.spec.cwd
        confine = await self.site.confine(cwd) if self.site is not None else None
        if confine is not None:
            argv, env = confine.command(argv, env)
            cwd = None  # bubblewrap enters the working directory inside
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=cwd,
            )
            out, err = await proc.communicate(self.spec.stdin)
        finally:
            if confine is not None:
                confine.release()
        if proc.returncode != 0:
            raise SystemExit(f"the direct spawn failed ({proc.returncode}): {err.decode(errors='replace')}")
        return out


async def direct_spawn(runner: Runner, tool: str, params: dict[str, Any], *, sandboxed: bool = True) -> DirectSpawn:
    """The direct spawn of `tool` (run once through `runner` first: files and environment
    exist); in the runner's sandbox when it is on and `sandboxed`."""
    plan: Plan = await runner.plan(tool)
    root = runner.settings.cache_dir
    workdir = materialise(plan, root)
    site = runner.site(plan, workdir, runner.environ_for(plan)) if sandboxed and runner.sandbox.enabled else None
    environ = site.environ if site is not None else runner.environ
    inside = site.tool_path() if site is not None else None  # /kiwi/tool in the sandbox
    placeholders = {"workdir": inside or str(workdir)}
    if plan.entrypoint:
        placeholders["entrypoint"] = f"{placeholders['workdir']}/{plan.entrypoint.path}"
    env_dir = await prepare_environment(plan.config, root, environ, site=site)
    if env_dir is not None and site is not None:
        site.env_dir = env_dir
        placeholders["env_dir"] = site.env_path(env_dir)
    elif env_dir is not None:
        placeholders["env_dir"] = str(env_dir)
    invocation = Invocation(
        plan=plan, params=params, workdir=workdir, placeholders=placeholders, environ=environ, site=site
    )
    return DirectSpawn(build_spec(invocation), site)


async def measure_spawn(runner: Runner, case: tuple[str, dict[str, Any], Any], runs: int) -> SpawnFigures:
    tool, params, expected = case
    figures = SpawnFigures(tool)
    started = time.perf_counter()
    first = await runner.run(tool, params)  # materialises, checks syntax, builds the environment
    if first.status != "success" or first.output != expected:
        raise SystemExit(f"{tool} did not run: {first.status} {first.error} {first.output!r}")
    figures.setup_s = time.perf_counter() - started
    spawn = await direct_spawn(runner, tool, params)
    bare = await direct_spawn(runner, tool, params, sandboxed=False) if spawn.site is not None else None
    figures.argv, figures.sandboxed = list(spawn.spec.argv), spawn.site is not None
    for each in (spawn, bare):
        if each is not None and json.loads(await each()) != expected:
            raise SystemExit(f"the direct spawn of {tool} gave another answer")

    timed = runner.registry if isinstance(runner.registry, TimedRegistry) else None

    async def via_runner(keep: bool = True) -> float:
        if timed is not None:  # note the RPCs of measured runs only
            timed.plan_ms, timed.record_ms = (figures.plan_rpc, figures.record_rpc) if keep else (None, None)
        t0 = time.perf_counter_ns()
        result = await runner.run(tool, params)
        ms = (time.perf_counter_ns() - t0) / 1e6
        # The record is written behind the run: let it finish outside the timed window, so
        # that it neither counts in the run's latency nor steals CPU from the next spawn.
        await runner.flush_records()
        if timed is not None:
            timed.plan_ms = timed.record_ms = None
        if result.status != "success" or result.output != expected or result.run_id is None:
            raise SystemExit(f"{tool} failed during the bench: {result.error} {result.warnings}")
        return ms

    async def timed_spawn(call: DirectSpawn) -> float:
        t0 = time.perf_counter_ns()
        await call()
        return (time.perf_counter_ns() - t0) / 1e6

    samples: list[tuple[Callable[[], Awaitable[float]], list[float]]] = [
        (via_runner, figures.runner),
        (partial(timed_spawn, spawn), figures.direct),
    ]
    if bare is not None:
        samples.append((partial(timed_spawn, bare), figures.bare))
    for _ in range(SPAWN_WARMUP):
        await via_runner(keep=False)
        for call, _ in samples[1:]:
            await call()
    for i in range(runs):  # rotate which goes first, so none always follows another
        k = i % len(samples)
        for call, into in samples[k:] + samples[:k]:
            into.append(await call())
    return figures


# --------------------------------------------------------------------------------------
# c: throughput of the API tool
# --------------------------------------------------------------------------------------


async def saturate(
    call: Callable[[int], Awaitable[None]],
    concurrency: int,
    total: int,
    finish: Callable[[], Awaitable[None]] | None = None,
) -> tuple[float, list[float]]:
    """`total` calls over `concurrency` tasks; calls/s and per-call latency (ms). `finish` is
    awaited inside the timed window (the runner's run records, written behind the runs)."""
    latencies: list[float] = []
    issued = 0

    async def worker() -> None:
        nonlocal issued
        while issued < total:
            n = issued
            issued += 1
            t0 = time.perf_counter_ns()
            await call(n)
            latencies.append((time.perf_counter_ns() - t0) / 1e6)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if finish is not None:
        await finish()
    return total / (time.perf_counter() - started), latencies


async def measure_throughput(
    runner: Runner, server: EchoServer, concurrency: int, calls: int, rounds: int, warmup: int
) -> ThroughputFigures:
    figures = ThroughputFigures(concurrency, server.url)
    plan = await runner.plan("http_echo")
    primitive = HttpClientPrimitive()
    registry = runner.registry

    async def full(n: int) -> None:
        message = f"hello {n}"
        result = await runner.run("http_echo", {"message": message})
        if result.status != "success" or result.output != {"message": message} or result.run_id is None:
            raise SystemExit(f"http_echo failed during the bench: {result.error} {result.warnings}")

    async def primitive_alone(n: int) -> None:
        message = f"hello {n}"
        outcome = await primitive.run(Invocation(plan=plan, params={"message": message}, environ=runner.environ))
        if outcome.status != "success" or outcome.output != {"message": message}:
            raise SystemExit(f"the http_client primitive failed during the bench: {outcome.error}")

    async def plan_alone(n: int) -> None:
        await registry.execution_plan("http_echo")

    cases: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
        ("runner", full),
        ("primitive", primitive_alone),
        ("plan lookup", plan_alone),
    ]
    meter = CpuMeter(server.stats)
    try:
        _log(f"[bench] c: echo server at {server.url}; its capacity first")
        await raw_load(server.host, server.port, concurrency, 2000)
        figures.raw_capacity = median([await raw_load(server.host, server.port, concurrency, 10000) for _ in range(3)])
        finishers = {"runner": runner.flush_records}
        for name, call in cases:
            await saturate(call, concurrency, warmup, finishers.get(name))
        for r in range(rounds):
            for name, call in cases:
                (rate, latencies), cpu = await meter.measure(
                    partial(saturate, call, concurrency, calls, finishers.get(name))
                )
                figures.rounds.append(ThroughputRound(name, calls, rate, latencies, cpu))
                _log(f"[bench] c: round {r + 1}/{rounds} {name}: {rate:,.0f} calls/s")
        served = [r for r in figures.rounds if r.what != "plan lookup" and r.cpu.server is not None]
        if served:
            total_cpu = sum(r.cpu.server or 0.0 for r in served)
            figures.server_cpu_per_request_us = total_cpu / sum(r.calls for r in served) * 1e6
    finally:
        await primitive.aclose()
    return figures


# --------------------------------------------------------------------------------------
# d: the CLI as a fresh process
# --------------------------------------------------------------------------------------


def measure_cli(runs: int, url: str, cache_dir: Path) -> CliFigures:
    env = {**os.environ, "KIWI_DATABASE_URL": url, "KIWI_CACHE_DIR": str(cache_dir)}
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "runner")], check=True, capture_output=True)
    kiwi = [*KIWI, "run", "hello_world", "-p", "name=Ada"]
    figures = CliFigures(command=" ".join(kiwi).replace(str(ROOT) + "/", ""))

    def wall_ms(
        argv: list[str], check: Callable[[subprocess.CompletedProcess[str]], bool], warm: bool = False
    ) -> float:
        t0 = time.perf_counter_ns()
        done = subprocess.run(argv, env=warm_env if warm else env, cwd=ROOT, capture_output=True, text=True)
        ms = (time.perf_counter_ns() - t0) / 1e6
        if done.returncode != 0 or not check(done):
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr or done.stdout}")
        return ms

    runtime = Path(tempfile.mkdtemp(prefix="kiwi-bench-agent-"))  # mode 0700, as a login's runtime directory
    warm_env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    env["KIWI_AGENT"] = "off"  # the cold command never asks an agent, even one the developer runs
    cases = [
        (figures.kiwi, kiwi, lambda d: "Hello, Ada!" in d.stdout, False),
        (figures.kiwi_warm, kiwi, lambda d: "Hello, Ada!" in d.stdout, True),
        (figures.import_kiwi, [PYTHON, "-c", KIWI_IMPORTS], lambda d: True, False),
        (figures.import_psycopg, [PYTHON, "-I", "-c", "import psycopg"], lambda d: True, False),
        (figures.python_pass, [PYTHON, "-I", "-c", "pass"], lambda d: True, False),
    ]
    with running_agent(warm_env):
        for i in range(CLI_WARMUP + runs):
            for samples, argv, check, warm in cases:
                ms = wall_ms(argv, check, warm)
                if i >= CLI_WARMUP:
                    samples.append(ms)
    shutil.rmtree(runtime, ignore_errors=True)
    return figures


@contextlib.contextmanager
def running_agent(env: dict[str, str]) -> Iterator[None]:
    """`kiwi agent` for the bench's identity and registry, until the block ends."""
    where = subprocess.run([*KIWI, "agent", "--where"], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    agent = subprocess.Popen([*KIWI, "agent"], env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not Path(where.stdout.strip()).exists():
            if agent.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kiwi agent did not start")
            time.sleep(0.05)
        yield
    finally:
        agent.terminate()
        agent.wait(timeout=30)


# --------------------------------------------------------------------------------------
# e: lines of the runner's core
# --------------------------------------------------------------------------------------


def core_files() -> list[str]:
    primitives = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "runner" / "primitives").glob("*.py"))
    return [*CORE_FILES, *primitives]


def count_lines(path: Path) -> tuple[int, int]:
    """(non-blank, non-comment lines; of which docstring lines)."""
    text = path.read_text()
    lines = text.splitlines()
    counted = {n for n, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith("#")}
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return len(counted), len(counted & docstrings)


def measure_lines() -> list[tuple[str, int, int]]:
    return [(name, *count_lines(ROOT / name)) for name in core_files()]


# --------------------------------------------------------------------------------------
# Verdicts and report
# --------------------------------------------------------------------------------------


def verdicts(f: Figures) -> list[Verdict]:
    out: list[Verdict] = []
    for s, label, target in (
        (f.a, "a. hello_world: Runner.run / direct bash spawn", 1.5),
        (f.b, "b. format_bytes: Runner.run / direct env python", 1.3),
    ):
        if s is None:
            continue
        where = ", both in the sandbox" if s.sandboxed else ""
        out.append(Verdict(f"{label}{where}, median", _ratio(s), "x", "<=", target))
        if s.bare:
            out.append(
                Verdict(
                    "   the direct spawn, sandboxed / on the host, median",
                    median(s.direct) / median(s.bare),
                    "x",
                    "<=",
                    target,
                    False,
                )
            )
    if f.c:
        full, prim = f.c.of("runner"), f.c.of("primitive")
        out.append(
            Verdict(
                f"c. http_echo through Runner.run, {f.c.concurrency} concurrent, median of rounds",
                median([r.rate for r in full]),
                "calls/s",
                ">=",
                1000,
            )
        )
        out.append(
            Verdict("   the http_client primitive alone", median([r.rate for r in prim]), "calls/s", ">=", 1000, False)
        )
    if f.d:
        d = f.d
        bare, driver = median(d.python_pass), median(d.import_psycopg)
        out.append(
            Verdict(
                "d. `kiwi run hello_world -p name=Ada`, fresh process, median "
                f"(floors this run: python {bare:.0f} ms, python + import psycopg {driver:.0f} ms)",
                median(d.kiwi),
                "ms",
                "<=",
                60,
            )
        )
        out.append(
            Verdict(
                "   ratio to a bare `python -I -c pass`, medians",
                median(d.kiwi) / bare,
                "x",
                "<=",
                round(60 / bare, 2),
                False,
            )
        )
        out.append(
            Verdict(
                "d, warm: the same `kiwi run` handed to a running `kiwi agent`, ratio to a bare "
                "`python -I -c pass`, medians",
                median(d.kiwi_warm) / bare,
                "x",
                "<=",
                8,
            )
        )
        out.append(Verdict("   warm, median", median(d.kiwi_warm), "ms", "<=", round(8 * bare), False))
        out.append(Verdict("   cold / warm, medians", median(d.kiwi) / median(d.kiwi_warm), "x", ">=", 1, False))
        out.append(Verdict("   its imports alone (runner, psycopg, ...)", median(d.import_kiwi), "ms", "<=", 60, False))
        out.append(  # the target's own ratio: below 1, 60 ms is less than the driver's import alone
            Verdict(
                '   ratio to the driver\'s floor `python -I -c "import psycopg"`, medians',
                median(d.kiwi) / driver,
                "x",
                "<=",
                round(60 / driver, 2),
                False,
            )
        )
        out.append(Verdict('   floor: python -I -c "import psycopg" (the driver alone)', driver, "ms", "<=", 60, False))
        out.append(Verdict("   floor: python -I -c pass", bare, "ms", "<=", 60, False))
    return out


def _ratio(s: SpawnFigures) -> float:
    return median(s.runner) / median(s.direct)


def _spawn_section(s: SpawnFigures, runs: int) -> list[str]:
    argv = " ".join(a.replace(str(ROOT) + "/", "") for a in s.argv)
    return [
        table(
            ["", "median [p95] ms", "overhead, median"],
            [
                [f"Runner.run({s.tool!r}, ...)", _mp(s.runner), f"+{median(s.runner) - median(s.direct):.2f} ms"],
                [
                    "direct spawn, same argv, env, stdin" + (", same sandbox" if s.sandboxed else ""),
                    _mp(s.direct),
                    "",
                ],
                *([["the same on the host, unsandboxed", _mp(s.bare), ""]] if s.bare else []),
                ["ratio of medians", f"{_ratio(s):.3f}", ""],
                ["within Runner.run: the plan lookup (in memory once warm)", _mp(s.plan_rpc), ""],
                ["behind Runner.run: the RPC writing its record (and audit row)", _mp(s.record_rpc), ""],
            ],
        ),
        "",
        f"{runs} interleaved pairs after {SPAWN_WARMUP} warm-up pairs. Direct: `{argv}`"
        + (f". First run (materialise, syntax check, environment): {s.setup_s * 1000:,.0f} ms." if s.setup_s else "."),
        "",
    ]


def _throughput_section(c: ThroughputFigures) -> list[str]:
    rows = []
    for r in c.rounds:
        cpu = r.cpu
        rows.append(
            [
                r.what,
                f"{r.rate:,.0f}",
                _mp(r.latency_ms),
                r.per_call_ms(cpu.runner),
                r.per_call_ms(cpu.postgres),
                r.per_call_ms(cpu.server),
                f"{cpu.machine / cpu.wall:.2f} of {os.cpu_count()}",
            ]
        )
    capacity = (
        f"; it spent {c.server_cpu_per_request_us:.0f} µs of CPU per request during the rounds "
        f"(about {1e6 / c.server_cpu_per_request_us:,.0f} requests/s on one core)"
        if c.server_cpu_per_request_us
        else ""
    )
    return [
        table(
            [
                "what",
                "calls/s",
                "latency ms, median [p95]",
                "this process CPU ms/call",
                "postgres CPU ms/call",
                "echo server CPU ms/call",
                "machine busy (cores)",
            ],
            rows,
        ),
        "",
        f"{c.concurrency} concurrent tasks, {c.rounds[0].calls:,} calls per round, the three cases in turn, "
        'after a warm-up. runner: `Runner.run("http_echo", {"message": ...})` (plan lookup, parameters, '
        "http_client, run record); primitive: the http_client primitive on the same plan; plan lookup: "
        "`registry.execution_plan` alone (in memory while the plan cache listens). CPU per call: this process from "
        "process_time, postgres from /proc (every postgres process: anything else using the cluster "
        "counts too), the echo server from its own clock; machine busy: all cores, from /proc/stat.",
        "",
        f"Echo server ({c.server_url}, bench/echo_server.py, its own process): a raw-socket keep-alive "
        f"client with {c.concurrency} connections got {c.raw_capacity:,.0f} requests/s from it "
        f"(median of 3 runs of 10,000){capacity}.",
        "",
    ]


def report(f: Figures, command: str, env: list[str], runs: int) -> tuple[str, list[Verdict]]:
    parts = ["# Kiwi runner benchmark", "", f"Reproduce: `{command}`", "", *env, ""]
    if f.a:
        parts += ["## a. Bash tool, warm: Runner.run against a direct spawn", "", *_spawn_section(f.a, runs)]
    if f.b:
        parts += [
            "## b. Python tool with a dependency, environment cached: Runner.run against a direct spawn",
            "",
            *_spawn_section(f.b, runs),
        ]
    if f.c:
        parts += ["## c. API tool throughput, one process", "", *_throughput_section(f.c)]
    if f.d:
        d = f.d
        parts += [
            "## d. `kiwi run` as a fresh process (wall time, ms)",
            "",
            table(
                ["command", "median [p95]", "min"],
                [
                    [f"`{d.command}`", _mp(d.kiwi, 1), f"{min(d.kiwi):.1f}"],
                    [f"`{d.command}`, `kiwi agent` running", _mp(d.kiwi_warm, 1), f"{min(d.kiwi_warm):.1f}"],
                    [f'`python -c "{KIWI_IMPORTS}"`', _mp(d.import_kiwi, 1), f"{min(d.import_kiwi):.1f}"],
                    ['`python -I -c "import psycopg"`', _mp(d.import_psycopg, 1), f"{min(d.import_psycopg):.1f}"],
                    ["`python -I -c pass`", _mp(d.python_pass, 1), f"{min(d.python_pass):.1f}"],
                    [
                        "ratio of medians, kiwi run / python -I -c pass",
                        f"{median(d.kiwi) / median(d.python_pass):.2f}",
                        "",
                    ],
                    [
                        "ratio of medians, warm kiwi run / python -I -c pass",
                        f"{median(d.kiwi_warm) / median(d.python_pass):.2f}",
                        "",
                    ],
                ],
            ),
            "",
            f"{len(d.kiwi)} runs of each, interleaved, after {CLI_WARMUP} warm-ups; the tool's files and "
            "syntax check already cached; PYTHONDONTWRITEBYTECODE="
            f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')} (the libraries' .pyc files come from "
            "`uv sync --compile-bytecode`, the runner's from `compileall` just before).",
            "",
        ]
    if f.e:
        total, docs = sum(n for _, n, _ in f.e), sum(d for _, _, d in f.e)
        parts += [
            "## e. The runner's core: non-blank, non-comment lines",
            "",
            table(
                ["file", "lines", "of which docstrings"],
                [[f"`{name}`", str(n), str(d)] for name, n, d in f.e] + [["total", str(total), str(docs)]],
            ),
            "",
        ]
    results = verdicts(f)
    parts += summary(results)
    return "\n".join(parts), results


def environment(url: str, commit: str, loop: str, load_start: float) -> list[str]:
    with psycopg.connect(url) as conn:
        row = conn.execute("show server_version").fetchone()
    versions = ", ".join(f"{name} {_version(name)}" for name in ("psycopg", "psycopg-pool", "httpx", "aiohttp"))
    return [
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"- git: {commit} at the start",
        f"- PostgreSQL {row[0] if row else '?'}; {os.cpu_count()} CPUs; Python {platform.python_version()}, "
        f"{versions}; event loop {loop}",
        f"- load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
    ]


def _version(name: str) -> str:
    try:
        return dist_version(name)
    except Exception:
        return "(not installed)"


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


async def measure_async(args: argparse.Namespace, only: set[str], url: str, cache_dir: Path) -> Figures:
    figures = Figures(loop=type(asyncio.get_running_loop()).__name__)
    server = EchoServer() if "c" in only else None
    environ = {**os.environ}
    if server is not None:
        environ["HTTP_ECHO_URL"] = server.url + "/echo"
    settings = Settings(backend="postgres", database_url=url, supabase_url=None, supabase_key=None, cache_dir=cache_dir)
    registry = TimedRegistry(url, principal=local_owner())
    # (c measures through it too: it only reads a clock when a and b ask it to)
    runner = Runner(registry, settings, environ=environ, on_progress=lambda line: _log(f"[runner] {line}"))
    try:
        if "a" in only:
            _log("[bench] a: hello_world against bash")
            figures.a = await measure_spawn(runner, HELLO, args.runs)
        if "b" in only:
            _log("[bench] b: format_bytes against its environment's python (building the environment first)")
            figures.b = await measure_spawn(runner, FORMAT, args.runs)
        if server is not None:
            figures.c = await measure_throughput(
                runner, server, args.concurrency, args.calls, args.rounds, args.warmup_calls
            )
    finally:
        await runner.aclose()
        if server is not None:
            server.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="a,b,c,d,e", help="comma-separated parts to run (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=200, help="a, b: interleaved pairs (default %(default)s)")
    parser.add_argument("--calls", type=int, default=5000, help="c: calls per round and case (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="c: rounds of the three cases (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=50, help="c: concurrent tasks (default %(default)s)")
    parser.add_argument("--warmup-calls", type=int, default=1000, help="c: warm-up calls per case (default 1000)")
    parser.add_argument("--cli-runs", type=int, default=21, help="d: fresh processes of each kind (default 21)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("KIWI_DATABASE_URL", DEFAULT_URL),
        help="the registry (default: KIWI_DATABASE_URL or the local stack)",
    )
    args = parser.parse_args()
    only = {p.strip() for p in args.only.split(",") if p.strip()}
    if unknown := only - set("abcde"):
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")

    command = ".venv/bin/python bench/runner_bench.py"
    for flag, default in (("only", "a,b,c,d,e"), ("runs", 200), ("calls", 5000), ("rounds", 3), ("concurrency", 50)):
        value = getattr(args, flag)
        if value != default:
            command += f" --{flag} {value}"
    commit, load_start = git_commit(), os.getloadavg()[0]
    cache_dir = Path(tempfile.mkdtemp(prefix="kiwi-runner-bench-"))
    try:
        figures = asyncio.run(measure_async(args, only, args.database_url, cache_dir))
        if "d" in only:
            _log("[bench] d: kiwi run as a fresh process")
            figures.d = measure_cli(args.cli_runs, args.database_url, cache_dir)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    if "e" in only:
        figures.e = measure_lines()

    env = environment(args.database_url, commit, figures.loop, load_start)
    text, results = report(figures, command, env, args.runs)
    print(text)
    if only == set("abcde"):
        RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_FILE.write_text(text + "\n")
        print(f"(written to {RESULTS_FILE.relative_to(ROOT)})")
    else:
        print(f"(a partial run: {RESULTS_FILE.relative_to(ROOT)} is left as it was)")
    return 0 if all(v.passed for v in results if v.judged) else 1


if __name__ == "__main__":
    sys.exit(main())
