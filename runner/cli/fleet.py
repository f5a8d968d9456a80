"""Runs that outlive the command: `kiwi queue` (queue a run), `kiwi run-status`, `kiwi cancel`,
`kiwi runs --queued`, `kiwi worker` (take queued runs and run them), `kiwi workers` (the fleet)
and `kiwi schedule add|list|pause|resume|rm`. The queue lives in Postgres (pgmq), so workers
on any machine that reaches the database take part."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from ..errors import UsageError
from .args import parse_params, positive_float, positive_int
from .long_lived import settle_heap

__all__ = ["add_fleet_commands", "print_queued"]

STATUSES = (
    "open",
    "queued",
    "running",
    "retrying",
    "waiting_approval",
    "success",
    "error",
    "timeout",
    "cancelled",
    "dead",
)


def add_fleet_commands(sub: Any) -> None:
    """Define the queue's and the fleet's commands on the `kiwi` parser's subparsers."""
    queue = sub.add_parser("queue", help="queue a run for a worker instead of waiting for it; prints its id")
    queue.add_argument("tool", metavar="TOOL", help="tool id, namespace/tool or tool@version")
    queue.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="one parameter")
    queue.add_argument("--params", metavar="JSON", help="all parameters as one JSON object")
    queue.add_argument("--version", metavar="V", help="this published version instead of the latest")
    queue.add_argument("--wait", action="store_true", help="wait for the run to end and print its result")
    queue.add_argument("--json", action="store_true", help="print one JSON object")
    queue.set_defaults(handler=cmd_queue)

    status = sub.add_parser("run-status", help="a queued run: its status, events and result")
    status.add_argument("run_id", metavar="RUN_ID")
    status.add_argument("--wait", action="store_true", help="wait until it ends")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=cmd_run_status)

    cancel = sub.add_parser("cancel", help="cancel a queued or running run (its processes are killed)")
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument("--json", action="store_true", help="print one JSON object")
    cancel.set_defaults(handler=cmd_cancel)

    worker = sub.add_parser("worker", help="take queued runs and run them, until interrupted")
    worker.add_argument("--concurrency", type=positive_int, default=1, metavar="N", help="runs at once (default 1)")
    worker.add_argument(
        "--lease",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds a taken run stays hidden from other workers, renewed while it runs (default 30)",
    )
    worker.add_argument(
        "--poll", type=positive_float, default=5.0, metavar="S", help="poll without a wake-up every S s"
    )
    worker.add_argument("--max-runs", type=positive_int, metavar="N", help="stop after N runs")
    worker.set_defaults(handler=cmd_worker)

    workers = sub.add_parser("workers", help="the live workers and what each runs (admins)")
    workers.add_argument("--json", action="store_true", help="print a JSON array")
    workers.set_defaults(handler=cmd_workers)

    _add_schedule_command(sub)


def _add_schedule_command(sub: Any) -> None:
    schedule = sub.add_parser("schedule", help="run tools on a schedule: add, list, pause, resume, rm")
    verbs = schedule.add_subparsers(dest="verb", required=True, metavar="VERB")
    add = verbs.add_parser("add", help="schedule a tool (its runs act as you)")
    add.add_argument("name", metavar="NAME", help="yours to choose: 1 to 100 characters, not blank")
    add.add_argument("tool", metavar="TOOL")
    add.add_argument("--cron", required=True, help='five cron fields ("*/5 * * * *") or "N seconds" (1-59)')
    add.add_argument("--tz", default="UTC", help="the time zone the cron fields are read in (default UTC)")
    add.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="one parameter")
    add.add_argument("--params", metavar="JSON", help="all parameters as one JSON object")
    add.add_argument("--version", metavar="V", help="pin this version (default: the latest at each tick)")
    for verb, text in (
        ("list", "your schedules"),
        ("pause", "pause one"),
        ("resume", "resume one"),
        ("rm", "remove one"),
    ):
        parser = verbs.add_parser(verb, help=text)
        if verb != "list":
            parser.add_argument("name", metavar="NAME", help="its name or id")
    for parser in verbs.choices.values():
        parser.add_argument("--json", action="store_true", help="print JSON")
    schedule.set_defaults(handler=cmd_schedule)


async def _params(registry: Any, args: argparse.Namespace, tool: str, version: str | None) -> dict[str, Any]:
    """The parameters given, as `kiwi run` reads them: `-p` values against the tool's schema (its
    plan, as the caller sees it), and checked now, so that bad ones are refused before anything
    is queued. Defaults are left to the run, which fills them from the version it runs."""
    from ..core.params import coerce_strings, validate_params

    params, raw = parse_params(args)
    plan = await registry.plan(tool, version)
    if raw:
        params = {**params, **coerce_strings(plan.parameters, raw, plan.tool_id)}
    validate_params(plan.tool_id, plan.parameters, params)
    return params


async def cmd_queue(args: argparse.Namespace) -> int:
    from ..core.refs import split_ref
    from ..fleet import QueuedRuns
    from ..registry import opened

    tool, version = split_ref(args.tool, args.version)
    async with opened(one_shot=True) as registry:
        runs = QueuedRuns(registry)
        params = await _params(registry, args, tool, version)
        queued = await runs.enqueue(tool, params, version=version, session_id="cli-queue")
        if args.wait:
            queued = await _wait(runs, str(queued["id"]))
    return _show(queued, args.json)


async def cmd_run_status(args: argparse.Namespace) -> int:
    from ..fleet import QueuedRuns
    from ..registry import opened

    async with opened(one_shot=True) as registry:
        runs = QueuedRuns(registry)
        found = await (_wait(runs, args.run_id) if args.wait else runs.get(args.run_id))
    return _show(found, args.json)


async def cmd_cancel(args: argparse.Namespace) -> int:
    from ..fleet import QueuedRuns
    from ..registry import opened

    async with opened(one_shot=True) as registry:
        answer = await QueuedRuns(registry).cancel(args.run_id)
    return _show(answer, args.json)


async def _wait(runs: Any, run_id: str) -> dict[str, Any]:
    """Follow the run until it ends, printing its events to stderr as they come."""
    last: dict[str, Any] = await runs.get(run_id)
    async for events, last in runs.follow(last):  # noqa: B007, B020 - the last run read is the answer
        for event in events:
            print(f"… {event['kind']}: {event.get('message') or ''}", file=sys.stderr)
    return last


def _show(run: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps({k: v for k, v in run.items() if k != "events"}, ensure_ascii=False, default=str))
    else:
        result = run.get("result") or {}
        if result.get("output") is not None:
            out = result["output"]
            print(out if isinstance(out, str) else json.dumps(out, indent=2, ensure_ascii=False, default=str))
        print_queued([run], file=sys.stderr)
        if run.get("error"):
            print(f"kiwi: {run['error']}", file=sys.stderr)
    status = run.get("status")
    return 0 if status in ("queued", "running", "retrying", "waiting_approval", "success", "cancelled") else 1


def print_queued(rows: list[dict[str, Any]], *, file: Any = None) -> None:
    """Queued runs as a table: id, status, tool, attempts, when."""
    out = file or sys.stdout
    for r in rows:
        tool = f"{r['tool_id']}@{r.get('version') or 'latest'}"
        attempt = f"attempt {r.get('attempt', 0)}/{r.get('max_attempts', 1)}"
        when = str(r.get("finished_at") or r.get("started_at") or r.get("queued_at") or "")[:19]
        print(f"{r['id']}  {r['status']:<16} {tool}  {attempt}  {when}", file=out)


async def cmd_queued_runs(args: argparse.Namespace) -> int:
    """`kiwi runs --queued`: the queued runs you may read, newest first."""
    from ..fleet import QueuedRuns
    from ..registry import opened

    status = args.status
    if status is not None and status not in STATUSES:
        raise UsageError(f"unknown status {status!r}", hint="one of: " + ", ".join(STATUSES))
    async with opened(one_shot=True) as registry:
        rows = await QueuedRuns(registry).page(status=status, limit=args.limit)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
    elif not rows:
        print("no queued runs", file=sys.stderr)
    else:
        print_queued(rows)
    return 0


async def cmd_worker(args: argparse.Namespace) -> int:
    from ..config import Settings
    from ..fleet.worker import Worker, WorkerOptions
    from ..handlers import standard_dispatcher
    from ..harness.run import Runner
    from ..registry import connect
    from ..search.background import background_embedding

    settings = Settings.load()
    if settings.backend != "postgres":
        raise UsageError("kiwi worker needs the Postgres registry", hint="set KIWI_DATABASE_URL")
    options = WorkerOptions(concurrency=args.concurrency, lease_s=args.lease, poll_s=args.poll, max_runs=args.max_runs)
    registry = connect(settings)
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), session=f"worker-{options.worker_id}")
    stop = asyncio.Event()
    worker = Worker(registry, settings, runner, options)

    def signalled() -> None:
        if stop.is_set():  # the second signal: stop now; the runs held come back to the queue after their lease
            print("stopping now: the runs held go back to the queue after their lease", file=sys.stderr)
            worker.abandon()
        else:
            print("stopping: no new runs; the runs held finish first (again to stop now)", file=sys.stderr)
            stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, signalled)
    print(f"worker {options.worker_id}: taking queued runs ({args.concurrency} at once); Ctrl-C stops", file=sys.stderr)
    started = time.monotonic()
    settle_heap()
    try:
        async with background_embedding(settings):  # what any path published, found by meaning
            await worker.run(stop)
    finally:
        await runner.aclose()
    print(f"worker {options.worker_id}: {worker.done} runs in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


async def cmd_workers(args: argparse.Namespace) -> int:
    from ..fleet import QueuedRuns
    from ..registry import opened

    async with opened(one_shot=True) as registry:
        rows = await QueuedRuns(registry).workers()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print("no workers (an admin sees them: kiwi --admin workers)", file=sys.stderr)
    for w in rows:
        running = ", ".join(w.get("running") or []) or "idle"
        print(f"{w['id']}  {w['state']:<7} {w['host']}:{w['pid']}  x{w['concurrency']}  {running}")
    return 0


SCHEDULE_NAME_RULE = "a schedule's name must be 1 to 100 characters, not blank, with no control characters"


def _check_schedule_name(name: str) -> None:
    """The rule the database holds names to (590_schedules.sql), said before anything is asked."""
    if not 1 <= len(name) <= 100 or not name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UsageError(
            f"{SCHEDULE_NAME_RULE} (got {name[:100]!r})", hint="for example: kiwi schedule add nightly TOOL --cron ..."
        )


async def cmd_schedule(args: argparse.Namespace) -> int:
    from ..fleet import QueuedRuns
    from ..registry import opened

    async with opened(one_shot=True) as registry:
        runs = QueuedRuns(registry)
        if args.verb == "add":
            from ..core.refs import split_ref

            _check_schedule_name(args.name)
            tool, version = split_ref(args.tool, args.version)
            request = {
                "name": args.name,
                "tool_id": tool,
                "version": version,
                "cron": args.cron,
                "time_zone": args.tz,
                "params": await _params(registry, args, tool, version),
            }
            answer: Any = await runs.add_schedule(request)
        elif args.verb == "list":
            answer = await runs.schedules()
        elif args.verb in ("pause", "resume"):
            answer = await runs.set_schedule_enabled(args.name, args.verb == "resume")
        else:
            answer = await runs.remove_schedule(args.name)
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, default=str))
        return 0
    for s in answer if isinstance(answer, list) else [answer]:
        state = "enabled" if s.get("enabled") else "paused"
        print(
            f"{s['name']}  {s['cron']!r} {s['time_zone']}  {s['tool_id']}@{s.get('version') or 'latest'}  "
            f"{state}  next {str(s.get('next_run_at'))[:19]}"
        )
    if isinstance(answer, list) and not answer:
        print("no schedules", file=sys.stderr)
    return 0
