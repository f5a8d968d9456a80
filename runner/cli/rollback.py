"""kiwi rollback RUN: put a working tree back to the checkpoint taken before a run that changed
it (a tool with config.mutates_state, run inside a directive: runner/harness/checkpoint.py).

The checkpoint tool restores it, through the gate and in its sandbox as any run; only the caller
whose run it was may roll it back, and only in the working tree the checkpoint is of (KIWI_WORKTREE,
else the directory kiwi runs in)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

__all__ = ["add_rollback_command"]


def add_rollback_command(sub: Any) -> None:
    """Define `kiwi rollback` on the `kiwi` parser's subparsers."""
    rollback = sub.add_parser(
        "rollback", help="restore the working tree a run changed to the checkpoint taken before it"
    )
    rollback.add_argument(
        "run", metavar="RUN", help="the run's id (a run that took a checkpoint), or a directive's context id"
    )
    rollback.add_argument("--json", action="store_true", help="print one JSON object")
    rollback.set_defaults(handler=cmd_rollback)


async def cmd_rollback(args: argparse.Namespace) -> int:
    from ..config import Settings
    from ..handlers import standard_dispatcher
    from ..harness.checkpoint import rollback
    from ..harness.run import Runner
    from ..registry import connect

    settings = Settings.load()
    session = f"cli-{uuid.uuid4()}"
    runner = Runner(connect(settings, one_shot=True), settings, dispatcher=standard_dispatcher(), session=session)
    try:
        done = await rollback(runner, args.run, session)
    finally:
        await runner.aclose()
    if args.json:
        print(json.dumps(done, ensure_ascii=False, default=str))
        return 0
    before = (done.get("restore") or {}).get("before_rollback")
    print(f"rolled back {done['worktree']} to checkpoint {done['checkpoint']} (taken before run {done['run_id']})")
    if before:
        print(f"the state it replaced is kept as checkpoint {before}", file=sys.stderr)
    return 0
