"""bench/all.py (`make bench`): runs on past a failed verdict and a broken bench, ends with one table.

Fake benches written into tmp_path stand in for the real ones (which take minutes); they
report through bench/report.py exactly as the real ones do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"

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
