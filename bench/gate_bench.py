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

and running a directive (create_script_tool), whose gate opens the child context its calls
are made in, then the first call under that context (bash_runtime, which it permits), as the gate made them
before issue 18 beside how it makes them now:

  dir, before       check_call and open_context, then get_context and check_call for the
                    call: 2 round trips with verdicts remembered (warm), 4 without (cold)
  dir, now          Gate.admit of both: open_context alone (warm: the decision remembered,
                    the context then held), or admit_call and check_call (cold)
  ctx, before/now   a call under a context the runner has not seen, no verdict remembered:
                    get_context then check_call, beside one admit_call

Targets (the summary): a directive run and its first call, and a call under a context not yet
held, each no slower than the round trips it replaced (issue 18: one round trip). Printed
beside them: the gate adds at most one database round trip (gate, trip / select 1: one
round trip plus the function's own work; and each beside a bare run), a directive run and a
call under a new context included.

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
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from report import Verdict, summary  # noqa: E402

from runner import Call, PostgresRegistry, Runner, Settings, local_owner  # noqa: E402
from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url  # noqa: E402
from runner.core.materialize import materialise  # noqa: E402

URL = os.environ.get("KIWI_DATABASE_URL") or stack_database_url(login=STACK_SUPERUSER_LOGIN)


async def main(runs: int) -> int:
    cache = Path(tempfile.mkdtemp(prefix="kiwi-gate-bench-"))
    atexit.register(shutil.rmtree, cache, True)  # the bench leaves no cache behind
    settings = Settings(backend="postgres", database_url=URL, supabase_url=None, supabase_key=None, cache_dir=cache)
    registry = PostgresRegistry(URL, principal=local_owner())
    runner = Runner(registry, settings, session="bench-gate")
    cold = Runner(PostgresRegistry(URL, principal=local_owner(), cache_plans=False), settings, session="bench-gate")
    plan = await runner.plan("hello_world")
    params = {"name": "Ada"}
    call = Call("bench-gate")
    if plan.entrypoint is None:
        raise SystemExit("hello_world has no entrypoint to spawn directly")
    script = materialise(plan, cache) / plan.entrypoint.path
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

    directive = await runner.plan("create_script_tool")
    session = "bench-gate"
    checked = {"tool_id": directive.tool_id, "version": directive.version, "session_id": session}
    checked["params_sha256"] = runner.gate.entry(call, directive, directive.tool_id, {}, False)["params_sha256"]
    permitted = await runner.plan("bash_runtime")
    under = {**checked, "tool_id": permitted.tool_id, "version": permitted.version}
    hello = {**checked, "tool_id": "hello_world", "version": plan.version}
    ref = f"{directive.tool_id}@{directive.version}"
    default = await registry.open_context(session)  # the session's default context: hello_world may run
    needs = {"tools": ["hello_world"], "shell": ["bash"]}

    async def before(kiwi: Runner) -> None:
        await kiwi.registry.check_call(checked)
        child = await kiwi.registry.open_context(session, ref, None, None)
        await kiwi.registry.get_context(child["id"])
        await kiwi.registry.check_call(under)

    async def now(kiwi: Runner) -> None:
        child = (await kiwi.gate.admit(directive, {}, call, False)).child_context or {}
        await kiwi.gate.admit(permitted, {}, Call(session, context=child["id"]), False)

    async def ctx_before() -> None:
        await cold.registry.get_context(default["id"])
        await cold.registry.check_call(hello)

    async def ctx_now() -> None:
        asked = {**hello, "context_id": default["id"], "needs": needs}
        assert (await cold.registry.admit_call(asked))["allowed"]

    work: dict[str, Callable[[], Awaitable[None]]] = {
        "gate": gate,
        "gate, trip": gate_trip,
        "select 1": select1,
        "bare run": bare,
        "kiwi run": kiwi_run,
        "dir, before": partial(before, runner),
        "dir, now": partial(now, runner),
        "dir, before, cold": partial(before, cold),
        "dir, now, cold": partial(now, cold),
        "ctx, before": ctx_before,
        "ctx, now": ctx_now,
    }
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
    with psycopg.connect(URL, autocommit=True) as conn:  # the contexts the directive runs opened
        conn.execute("delete from public.execution_contexts where session_id = 'bench-gate'")
    med = {name: statistics.median(v) for name, v in samples.items()}
    print(f"gate bench: {runs} interleaved samples each, medians")
    for name, ms in med.items():
        print(f"  {name:<17} {ms:8.3f} ms")
    trip = med["gate, trip"]
    print(f"  gate, trip / select 1:  {trip / med['select 1']:.2f}x (one round trip plus check_call's work)")
    print(f"  gate, trip / bare run:  {trip / med['bare run']:.2f}x; from memory: {med['gate'] / med['bare run']:.2f}x")
    print(f"  kiwi run / bare run:    {med['kiwi run'] / med['bare run']:.2f}x (gate and audit included)")
    pairs = [("dir, now", "dir, before"), ("dir, now, cold", "dir, before, cold"), ("ctx, now", "ctx, before")]
    for after, was in pairs:
        print(f"  {after} / {was}: {med[after] / med[was]:.2f}x")
    verdicts = [
        # issue 18 item 1: the gate in one round trip, so never slower than the trips it replaced
        Verdict("directive run + first call, warm: now / the round trips before", *_ratio(med, pairs[0]), "x", "<=", 1),
        Verdict("directive run + first call, cold: now / the round trips before", *_ratio(med, pairs[1]), "x", "<=", 1),
        Verdict(
            "call under a context not yet held: admit_call / get_context + check_call",
            *_ratio(med, pairs[2]),
            "x",
            "<=",
            1,
        ),
    ]
    print("\n".join(summary(verdicts)))
    return 0 if all(v.passed for v in verdicts if v.judged) else 1


def _ratio(med: dict[str, float], pair: tuple[str, str]) -> tuple[float]:
    return (med[pair[0]] / med[pair[1]],)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    sys.exit(asyncio.run(main(parser.parse_args().runs)))
