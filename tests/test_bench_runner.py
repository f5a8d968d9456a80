"""bench/all.py (`make bench`): runs on past a failed verdict and a broken bench, ends with one table.

Fake benches written into tmp_path stand in for the real ones (which take minutes); they
report through bench/report.py exactly as the real ones do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

FAKE = """\
import sys
sys.path.insert(0, {bench!r})
from report import Verdict, summary

print("fake {name} ran")
{body}
"""

PASSING = """\
print("\\n".join(summary([
    Verdict("fast path, median", 0.5, "ms", "<=", 2),
    Verdict("context only", 30, "ms", "<=", 10, judged=False),
])))
sys.exit(0)
"""

FAILING = """\
results = [Verdict("throughput", 250, "calls/s", ">=", 400), Verdict("start-up", 40, "ms", "<=", 60)]
print("\\n".join(summary(results)))
sys.exit(0 if all(v.passed for v in results) else 1)
"""

CRASHING = """\
raise RuntimeError("the fake bench breaks before any verdict")
"""


def write_fakes(tmp_path: Path) -> list[Path]:
    scripts = []
    for name, body in (("failing", FAILING), ("crashing", CRASHING), ("passing", PASSING)):
        path = tmp_path / f"fake_{name}_bench.py"
        path.write_text(FAKE.format(bench=str(BENCH), name=name, body=body))
        scripts.append(path)
    return scripts


def run_all(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "all.py"), *args], capture_output=True, text=True, timeout=60, check=False
    )


def final_rows(stdout: str) -> list[list[str]]:
    """The cells of the final table's data rows."""
    tail = stdout.split("# All benchmarks", 1)[1]
    lines = [line for line in tail.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


@pytest.mark.slow
def test_every_bench_runs_and_one_table_ends_the_run(tmp_path: Path) -> None:
    scripts = write_fakes(tmp_path)
    done = run_all("--scripts", ",".join(str(s) for s in scripts))

    assert done.returncode == 1, done.stdout + done.stderr
    for name in ("failing", "crashing", "passing"):  # the failure and the crash did not stop the run
        assert f"fake {name} ran" in done.stdout
    assert "the fake bench breaks before any verdict" in done.stderr  # its traceback streamed through

    rows = final_rows(done.stdout)
    assert [(r[0], r[1], r[4], r[5]) for r in rows] == [
        ("fake_failing", "throughput", "0.62", "FAIL"),
        ("fake_failing", "start-up", "0.67", "PASS"),
        ("fake_passing", "fast path, median", "0.25", "PASS"),
        ("fake_passing", "context only", "3.00", "(info)"),
    ]
    assert "- fake_crashing: BROKE (exit 1)" in done.stdout
    assert "3 targets judged: 2 passed, 1 failed; broke: fake_crashing" in done.stdout


def test_only_runs_the_named_benches_and_passes_when_they_pass(tmp_path: Path) -> None:
    scripts = write_fakes(tmp_path)
    done = run_all("--scripts", ",".join(str(s) for s in scripts), "--only", "fake_passing")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "fake passing ran" in done.stdout
    assert "fake failing ran" not in done.stdout and "fake crashing ran" not in done.stdout
    assert [r[0] for r in final_rows(done.stdout)] == ["fake_passing", "fake_passing"]
    assert "none broke" in done.stdout


PROSE_BEFORE = """# Performance

Written by hand, and kept.

## Passing

<!-- bench:fake_passing:begin -->

an old table of fake_passing

<!-- bench:fake_passing:end -->

Why it is fast, by hand.

## Failing and crashing

<!-- bench:fake_failing:begin -->

an old table of fake_failing

<!-- bench:fake_failing:end -->

<!-- bench:fake_crashing:begin -->

an old table of fake_crashing

<!-- bench:fake_crashing:end -->

The last words, by hand.
"""


def block_of(page: str, name: str) -> str:
    return page.split(f"<!-- bench:{name}:begin -->", 1)[1].split(f"<!-- bench:{name}:end -->", 1)[0]


def table_rows(text: str) -> list[list[str]]:
    """A Markdown table's header and rows, as cells (the separator line left out)."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]


def without_block(page: str, name: str) -> str:
    return page.replace(block_of(page, name), "")


def today_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


@pytest.mark.slow
def test_a_run_writes_only_its_own_benches_tables_into_the_page(tmp_path: Path) -> None:
    """--only fake_passing rewrites fake_passing's block, with its figures, date and machine;
    the other blocks and every line of prose stay as they were, byte for byte."""
    page = tmp_path / "performance.md"
    page.write_text(PROSE_BEFORE)
    scripts = write_fakes(tmp_path)
    day_before = today_utc()
    done = run_all("--scripts", ",".join(str(s) for s in scripts), "--only", "fake_passing", "--page", str(page))
    days = {day_before, today_utc()}

    assert done.returncode == 0, done.stdout + done.stderr
    after = page.read_text()
    assert without_block(after, "fake_passing") == without_block(PROSE_BEFORE, "fake_passing")
    written = block_of(after, "fake_passing")
    assert "an old table" not in written
    lead = written.strip().splitlines()[0]
    assert any(f"last run by `make bench` on {day}" in lead for day in days), lead
    assert f"{len(os.sched_getaffinity(0))} CPUs (nproc), " in lead
    cpu = lead.split("CPUs (nproc), ", 1)[1].split(";", 1)[0]
    assert cpu.strip(), lead  # the CPU's model, whatever this machine calls it
    assert table_rows(written) == [
        ["metric", "figure", "target", "ratio", "verdict"],
        ["fast path, median", "0.500 ms", "<= 2 ms", "0.25", "PASS"],
        ["context only", "30.000 ms", "<= 10 ms", "3.00", "(info)"],
    ]
    assert "performance.md: wrote fake_passing" in done.stdout


@pytest.mark.slow
def test_a_failed_target_is_written_and_a_broken_bench_keeps_its_old_table(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(PROSE_BEFORE)
    scripts = write_fakes(tmp_path)
    done = run_all("--scripts", ",".join(str(s) for s in scripts), "--page", str(page))

    assert done.returncode == 1
    after = page.read_text()
    assert table_rows(block_of(after, "fake_failing"))[1:] == [
        ["throughput", "250.0 calls/s", ">= 400 calls/s", "0.62", "FAIL"],
        ["start-up", "40.000 ms", "<= 60 ms", "0.67", "PASS"],
    ]
    assert block_of(after, "fake_crashing") == block_of(PROSE_BEFORE, "fake_crashing")
    assert "left as they were: fake_crashing (broke)" in done.stdout
    for kept in ("Written by hand, and kept.", "Why it is fast, by hand.", "The last words, by hand."):
        assert kept in after


def test_a_bench_the_page_has_no_place_for_is_appended_under_its_own_heading(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text("# Performance\n\nOnly prose.\n")
    scripts = write_fakes(tmp_path)
    done = run_all("--scripts", ",".join(str(s) for s in scripts), "--only", "fake_passing", "--page", str(page))

    assert done.returncode == 0, done.stdout + done.stderr
    after = page.read_text()
    assert after.startswith("# Performance\n\nOnly prose.\n\n## fake_passing\n\n<!-- bench:fake_passing:begin -->")
    assert "fast path, median" in block_of(after, "fake_passing")


@pytest.mark.slow
def test_fake_benches_write_no_page_unless_one_is_named(tmp_path: Path) -> None:
    """--scripts (these tests' fakes) never touches docs/performance.md by default."""
    real = ROOT / "docs" / "performance.md"
    before = real.read_text()
    scripts = write_fakes(tmp_path)
    done = run_all("--scripts", ",".join(str(s) for s in scripts), "--only", "fake_passing")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "performance.md: wrote" not in done.stdout
    assert real.read_text() == before


def test_the_page_has_one_block_for_every_bench() -> None:
    """`make bench` writes each bench into its own section of docs/performance.md, never at the end."""
    page = (ROOT / "docs" / "performance.md").read_text()
    begins = re.findall(r"<!-- bench:(\w+):begin -->", page)
    ends = re.findall(r"<!-- bench:(\w+):end -->", page)
    benches = sorted(p.stem.removesuffix("_bench") for p in BENCH.glob("*_bench.py"))
    assert sorted(begins) == sorted(ends) == benches
