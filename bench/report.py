"""What every benchmark's report shares: a verdict per target, markdown tables, the commit."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERDICTS_ENV = "KIWI_BENCH_VERDICTS"  # a file bench/all.py reads the verdicts back from


@dataclass(frozen=True)
class Verdict:
    """One summary line: figure against target; ratio = figure / target."""

    metric: str
    figure: float
    unit: str
    op: str  # "<=" or ">="
    target: float
    judged: bool = True  # False: shown for context, no verdict

    @property
    def ratio(self) -> float:
        return self.figure / self.target

    @property
    def passed(self) -> bool:
        return self.figure <= self.target if self.op == "<=" else self.figure >= self.target

    def row(self) -> list[str]:
        verdict = ("PASS" if self.passed else "FAIL") if self.judged else "(info)"
        digits = 0 if abs(self.figure) >= 1000 else 1 if abs(self.figure) >= 100 else 3
        return [
            self.metric,
            f"{self.figure:,.{digits}f} {self.unit}".strip(),
            f"{self.op} {self.target:,g} {self.unit}".strip(),
            f"{self.ratio:.2f}",
            verdict,
        ]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)])


def record(results: list[Verdict]) -> None:
    """Append the verdicts as JSON lines to $KIWI_BENCH_VERDICTS, when set: bench/all.py's one table."""
    if path := os.environ.get(VERDICTS_ENV):
        with open(path, "a", encoding="utf-8") as out:
            out.writelines(json.dumps(asdict(v)) + "\n" for v in results)


def summary(results: list[Verdict]) -> list[str]:
    """The report's closing section: every target with its figure, ratio and verdict."""
    record(results)
    return [
        "## Summary",
        "",
        table(["metric", "figure", "target", "ratio", "verdict"], [v.row() for v in results]),
        "",
        "ratio = figure / target: a `<=` target passes at ratio <= 1, a `>=` one at >= 1.",
        "",
    ]


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
