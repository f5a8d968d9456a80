"""Every benchmark in turn, on past failures, ending with one table of all targets (`make bench`).

Each bench runs as its own process with its output streamed as it goes. Its verdicts come
back as JSON lines through $KIWI_BENCH_VERDICTS (report.record, called by report.summary),
not scraped from its text. A bench that exits 1 after a failed verdict failed a target;
any other non-zero exit (a traceback exits 1 too) means the bench itself broke, and is
reported as broken. Exits 1 if any target failed or any bench broke.

Then each bench that ran (failed targets included, a broken bench not) has its table written
into docs/performance.md between its markers (bench/performance_page.py), with the date, the
commit and the machine; the other benches' tables and the prose around them stay as they were.

Run:  .venv/bin/python bench/all.py [--only registry,search] [--args 'registry=--sizes 1000'] [--no-page]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import performance_page
from report import ROOT, VERDICTS_ENV, Verdict, git_commit, table

HERE = Path(__file__).resolve().parent
BENCHES = (
    "registry",
    "runner",
    "sandbox",
    "gate",
    "mcp",
    "mcp_server",
    "mcp_execute",
    "search",
    "hostile",
    "sessions",
    "queue",
    "telemetry",
)  # bench/<name>_bench.py, in this order


@dataclass
class Outcome:
    """One bench's run: its exit code and the verdicts it recorded."""

    name: str
    code: int
    seconds: float
    verdicts: list[Verdict]
    started: datetime
    load: float  # the 1-minute load average when it started

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.judged and not v.passed]

    @property
    def broke(self) -> bool:
        """A non-zero exit that no failed verdict explains."""
        return self.code != 0 and not (self.code == 1 and self.failed)


def bench_name(script: Path) -> str:
    return script.stem.removesuffix("_bench")


def run_one(script: Path, args: list[str], workdir: Path) -> Outcome:
    """Run one bench, its output going straight to ours, and read back its verdicts."""
    name = bench_name(script)
    verdicts_file = workdir / f"{name}.jsonl"
    print(f"\n==> {name}: {shlex.join([Path(sys.executable).name, str(script), *args])}", flush=True)
    env = {**os.environ, VERDICTS_ENV: str(verdicts_file), "PYTHONUNBUFFERED": "1"}
    started, load = datetime.now(UTC), os.getloadavg()[0]
    clock = time.monotonic()
    code = subprocess.run([sys.executable, str(script), *args], env=env, check=False).returncode
    seconds = time.monotonic() - clock
    lines = verdicts_file.read_text(encoding="utf-8").splitlines() if verdicts_file.exists() else []
    verdicts = [Verdict(**json.loads(line)) for line in lines if line.strip()]
    print(f"<== {name}: exit {code} after {seconds:.0f} s, {len(verdicts)} targets recorded", flush=True)
    return Outcome(name, code, seconds, verdicts, started, load)


def final_report(outcomes: list[Outcome]) -> tuple[str, bool]:
    """The one table of every target across the benches, a line per bench without targets; and ok."""
    rows = [[o.name, *v.row()] for o in outcomes for v in o.verdicts]
    lines = ["", "# All benchmarks", ""]
    if rows:
        lines += [table(["bench", "metric", "figure", "target", "ratio", "verdict"], rows), ""]
    for o in outcomes:
        if o.broke:
            lines.append(f"- {o.name}: BROKE (exit {o.code}) after {o.seconds:.0f} s; its output above says why")
        elif not o.verdicts:
            lines.append(f"- {o.name}: no targets recorded (figures only), exit {o.code}")
    judged = [v for o in outcomes for v in o.verdicts if v.judged]
    failed = sum(len(o.failed) for o in outcomes)
    broke = [o.name for o in outcomes if o.broke]
    lines.append(
        f"{len(outcomes)} benches, {len(judged)} targets judged: {len(judged) - failed} passed, {failed} failed; "
        + (f"broke: {', '.join(broke)}" if broke else "none broke")
    )
    return "\n".join(lines), not failed and not broke


def scripts_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[Path]:
    if args.scripts:
        scripts = [Path(s) for s in args.scripts.split(",") if s.strip()]
    else:
        scripts = [HERE / f"{name}_bench.py" for name in BENCHES]
    if args.only:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
        if unknown := only - {bench_name(s) for s in scripts}:
            parser.error(f"unknown benches: {', '.join(sorted(unknown))}")
        scripts = [s for s in scripts if bench_name(s) in only]
    return scripts


def write_page(page: Path, outcomes: list[Outcome]) -> str:
    """Each bench that ran to its verdicts gets its table on the page; a broken one keeps its old one."""
    commit, machine = git_commit(), performance_page.Machine.here()
    runs = [
        performance_page.Run(o.name, o.verdicts, commit, o.load, o.started, machine) for o in outcomes if not o.broke
    ]
    performance_page.write(page, runs)
    kept = [o.name for o in outcomes if o.broke]
    return f"{page.name}: wrote {', '.join(r.name for r in runs) or 'nothing'}" + (
        f"; left as they were: {', '.join(kept)} (broke)" if kept else ""
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated benches to run (default all: {','.join(BENCHES)})")
    parser.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="arguments for one bench, e.g. 'registry=--sizes 1000' (repeatable)",
    )
    parser.add_argument("--scripts", help="comma-separated bench scripts to run instead of bench/*_bench.py")
    parser.add_argument(
        "--page",
        type=Path,
        help=f"the page to write each bench's table into (default {performance_page.PAGE.relative_to(ROOT)}; "
        "with --scripts, none unless named)",
    )
    parser.add_argument("--no-page", action="store_true", help="write no page, only print")
    args = parser.parse_args()
    page = None if args.no_page else args.page or (None if args.scripts else performance_page.PAGE)
    scripts = scripts_from(args, parser)
    extra: dict[str, list[str]] = {}
    for item in args.args:
        name, sep, rest = item.partition("=")
        if not sep or name not in {bench_name(s) for s in scripts}:
            parser.error(f"--args {item!r}: expected NAME=ARGS with NAME one of the benches run")
        extra[name] = shlex.split(rest)
    with tempfile.TemporaryDirectory(prefix="kiwi-bench-all-") as workdir:
        outcomes = [run_one(s, extra.get(bench_name(s), []), Path(workdir)) for s in scripts]
    text, ok = final_report(outcomes)
    print(text)
    if page is not None:
        print(write_page(page, outcomes))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
