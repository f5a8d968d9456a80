"""docs/performance.md's measured tables, written by `make bench` (bench/all.py).

The page is prose written by hand around one generated block per bench, between two markers:

    <!-- bench:gate:begin -->
    ...the figures of the last run, its date and its machine...
    <!-- bench:gate:end -->

Writing a bench's block replaces what stands between its own markers and nothing else, so a
run of some benches (`--only`) leaves every other block, and every word of prose, as it was.
A bench whose markers the page lacks gets them appended at the end, under a heading of its
own, to be moved where it belongs by hand.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from report import ROOT, Verdict, table

PAGE = ROOT / "docs" / "performance.md"
HEADER = ["metric", "figure", "target", "ratio", "verdict"]


def begin_marker(name: str) -> str:
    return f"<!-- bench:{name}:begin -->"


def end_marker(name: str) -> str:
    return f"<!-- bench:{name}:end -->"


@dataclass(frozen=True)
class Machine:
    """Where the figures were measured: they move with the cores and the CPU."""

    cpus: int  # what nproc prints: the CPUs this process may run on
    cpu_model: str

    @classmethod
    def here(cls) -> Machine:
        return cls(len(os.sched_getaffinity(0)), cpu_model())

    def describe(self) -> str:
        return f"{self.cpus} CPUs (nproc), {self.cpu_model}"


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name as the kernel reports it (x86: `model name`; Arm: `Hardware` or
    `Model`), else what Python knows of the machine."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for key in ("model name", "Hardware", "Model", "cpu model"):
        if found := re.search(rf"^{key}\s*:\s*(.+)$", text, re.M):
            return found.group(1).strip()
    return platform.processor() or platform.machine() or "unknown CPU"


@dataclass(frozen=True)
class Run:
    """One bench's run, as its block on the page tells it."""

    name: str
    verdicts: list[Verdict]
    commit: str
    load: float  # the 1-minute load average when it started
    when: datetime
    machine: Machine


def block(run: Run) -> str:
    """A bench's block: who measured what, where and when, then its table (or why there is none)."""
    lead = (
        f"`bench/{run.name}_bench.py`, last run by `make bench` on {run.when:%Y-%m-%d} (commit {run.commit}; "
        f"{run.machine.describe()}; load {run.load:.2f} at its start)"
    )
    if not run.verdicts:
        return f"{lead}: it records no targets; its figures are in its own output.\n"
    return f"{lead}:\n\n{table(HEADER, [v.row() for v in run.verdicts])}\n"


def replace_block(page: str, name: str, body: str) -> str:
    """`page` with what stands between `name`'s markers replaced by `body`, the rest untouched;
    the markers appended at the end, under a heading, when the page has none."""
    begin, end = begin_marker(name), end_marker(name)
    fresh = f"{begin}\n\n{body.strip()}\n\n{end}"  # blank lines: Markdown reads the body as Markdown
    start = page.find(begin)
    if start < 0:
        return f"{page.rstrip()}\n\n## {name}\n\n{fresh}\n"
    stop = page.find(end, start)
    if stop < 0:
        raise ValueError(f"the page opens {begin} but never closes it with {end}")
    return page[:start] + fresh + page[stop + len(end) :]


def write(path: Path, runs: list[Run]) -> None:
    """Each run's block written into the page at `path`, in one write."""
    text = path.read_text(encoding="utf-8")
    for run in runs:
        text = replace_block(text, run.name, block(run))
    path.write_text(text, encoding="utf-8")
