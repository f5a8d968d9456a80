"""What the gate costs a run (issue 12): its database round trip beside a bare run.

Every call of `kiwi run`, MCP `execute`, threads and directives passes the gate
(runner/policy/gate.py): permissions (in memory), then ONE round trip, `check_call`,
for rate limits and approvals; the audit row is written behind the reply. Measured in
one run, interleaved, medians over --runs samples, against the local registry:

  gate        Gate.admit for hello_world (plan already resolved), as the local owner, in a
              long-lived runner: nothing covers hello_world, so after the first call the
              verdict comes from memory until a limit, policy or plan changes
  gate, trip  the same with the registry's memory off (cache_plans=False): one check_call
              round trip, what every call some limit or policy covers pays
  select 1    a prepared `select 1` round trip on the same pool: the floor of one trip
  bare run    spawning hello_world's script directly (bash, stdin JSON), what a run costs
              without Kiwi
  kiwi run    Runner.run("hello_world") warm, gate and audit included

Target: the gate adds at most one database round trip (printed: gate, trip / select 1: one
round trip plus the function's own work; and each beside a bare run).

Run:  .venv/bin/python bench/gate_bench.py [--runs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner import Call, PostgresRegistry, Runner, Settings, local_owner  # noqa: E402
from runner.core.materialize import materialise  # noqa: E402

URL = os.environ.get("KIWI_DATABASE_URL", "postgresql://postgres:postgres@127.0.0.1:54322/postgres")


async def main(runs: int) -> None:
    cache = Path(tempfile.mkdtemp(prefix="kiwi-gate-bench-"))
    atexit.register(shutil.rmtree, cache, True)  # the bench leaves no cache behind
    settings = Settings(backend="postgres", database_url=URL, supabase_url=None, supabase_key=None, cache_dir=cache)
    registry = PostgresRegistry(URL, principal=local_owner())
    runner = Runner(registry, settings, session="bench-gate")
    cold = Runner(PostgresRegistry(URL, principal=local_owner(), cache_plans=False), settings, session="bench-gate")
    plan = await runner.plan("hello_world")
    params = {"name": "Ada"}
    call = Call("bench-gate")
    script = materialise(plan, cache) / plan.entrypoint.path  # type: ignore[union-attr]
    stdin = json.dumps(params).encode()

    async def gate() -> None:
        await runner.gate.admit(plan, params, call, False)

    async def gate_trip() -> None:
        await cold.gate.admit(plan, params, call, False)

    async def select1() -> None:
        await registry.backend._value("select 1", ())

    async def bare() -> None:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            str(script),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={"PATH": os.environ["PATH"], "KIWI_PARAM_NAME": "Ada"},
        )
        await proc.communicate(stdin)

    async def kiwi_run() -> None:
        result = await runner.run("hello_world", params, call=call)
        assert result.ok, result.error

    work = {"gate": gate, "gate, trip": gate_trip, "select 1": select1, "bare run": bare, "kiwi run": kiwi_run}
    samples: dict[str, list[float]] = {name: [] for name in work}
    for i in range(runs + 20):
        for name, fn in work.items():
            started = time.perf_counter()
            await fn()
            if i >= 20:  # warm-up excluded
                samples[name].append((time.perf_counter() - started) * 1000)
        await runner.flush_records()
    await runner.aclose()
    await cold.aclose()
    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"gate bench: {runs} interleaved samples each, medians")
    for name, ms in med.items():
        print(f"  {name:<10} {ms:8.3f} ms")
    trip = med["gate, trip"]
    print(f"  gate, trip / select 1:  {trip / med['select 1']:.2f}x (one round trip plus check_call's work)")
    print(f"  gate, trip / bare run:  {trip / med['bare run']:.2f}x; from memory: {med['gate'] / med['bare run']:.2f}x")
    print(f"  kiwi run / bare run:    {med['kiwi run'] / med['bare run']:.2f}x (gate and audit included)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    asyncio.run(main(parser.parse_args().runs))
