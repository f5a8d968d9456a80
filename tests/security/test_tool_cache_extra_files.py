"""A cached tool directory holds the plan's files and nothing else (runner/core/materialize.py).

Found on a clean checkout: a tenant's tool wrote `humanize.py` beside the public tool
`format_bytes.py` in `<cache>/tools/<content_hash>/`, and the next user's `format_bytes` run
imported it, because reuse re-hashed only the files the plan lists. Now anything unlisted (a
file, a directory, a symlink, a fifo) makes the directory be written again from the plan, with
a warning, on a cold check and on a warm one (whose stamps cover the directories too); the
files are read-only and the directories 0555. A listed file changed on disk is still an
IntegrityError (test_plan_files_checked_once.py, test_tampering.py), not a silent rebuild.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from runner import IntegrityError, Plan, PlanFile
from runner.core.materialize import COMPLETE, RACY_NS, materialise

FORMAT_BYTES = """\
try:
    import humanize
    print("imported", humanize.__file__)
except ImportError:
    print("clean")
"""
ROOT = Path(__file__).resolve().parents[2]
HELPER = "def size(n):\n    return f'{n} B'\n"
PLANTED = "import os\nprint('planted ran as', os.getuid())\n"


def _plan(files: dict[str, str], entry: str = "format_bytes.py") -> Plan:
    return Plan(
        tool_id="format_bytes",
        version="1.0.0",
        tool_type="script",
        content_hash=uuid.uuid4().hex * 2,
        primitive=None,
        executor_id=None,
        chain=[],
        config={},
        parameters=None,
        files=[
            PlanFile(rel, hashlib.sha256(text.encode()).hexdigest(), len(text), rel == entry, text)
            for rel, text in files.items()
        ],
    )


def _listing(target: Path) -> set[str]:
    """Every entry under target, directories with a trailing slash (symlinks not followed)."""
    found = set()
    for top, dirs, files in os.walk(target):
        rel = os.path.relpath(top, target)
        for name in dirs:
            found.add(os.path.normpath(os.path.join(rel, name)) + "/")
        for name in files:
            found.add(os.path.normpath(os.path.join(rel, name)))
    return found


def _writable(path: Path) -> None:
    """What a tool of the same user would do first: a read-only directory can be made writable."""
    path.chmod(0o755)


def _plant_file(target: Path) -> None:
    _writable(target)
    (target / "humanize.py").write_text(PLANTED)


def _plant_directory(target: Path) -> None:
    _writable(target)
    (target / "humanize").mkdir()
    (target / "humanize" / "__init__.py").write_text(PLANTED)


def _plant_symlink(target: Path) -> None:
    _writable(target)
    (target / "humanize.py").symlink_to("/etc/passwd")


def _plant_fifo(target: Path) -> None:
    _writable(target)
    os.mkfifo(target / "humanize.py")


def _plant_pycache(target: Path) -> None:
    _writable(target)
    (target / "__pycache__").mkdir()
    (target / "__pycache__" / "humanize.cpython-311.pyc").write_bytes(b"\x00" * 16)


def _plant_in_listed_subdirectory(target: Path) -> None:
    _writable(target / "lib")
    (target / "lib" / "humanize.py").write_text(PLANTED)


def _plant_keeping_the_mtime(target: Path) -> None:
    """The directory's mtime put back as it was: its ctime still moves."""
    before = target.stat()
    _plant_file(target)
    target.chmod(0o555)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))


PLANTINGS: dict[str, Callable[[Path], None]] = {
    "file": _plant_file,
    "directory": _plant_directory,
    "symlink": _plant_symlink,
    "fifo": _plant_fifo,
    "pycache": _plant_pycache,
    "in a listed subdirectory": _plant_in_listed_subdirectory,
    "keeping the mtime": _plant_keeping_the_mtime,
}
FILES = {"format_bytes.py": FORMAT_BYTES, "lib/units.py": HELPER}


def _expected(files: dict[str, str]) -> set[str]:
    dirs = {str(p) + "/" for rel in files for p in Path(rel).parents if str(p) != "."}
    return {*files, COMPLETE, *dirs}


def _warm(plan: Plan, root: Path) -> Path:
    """Materialised and checked once past the racy window: the next check is the warm path."""
    target = materialise(plan, root)
    time.sleep(2 * RACY_NS / 1e9)
    assert materialise(plan, root) == target
    return target


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("plant", list(PLANTINGS), ids=list(PLANTINGS))
def test_an_unlisted_entry_makes_the_directory_be_written_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, plant: str, warm: bool
) -> None:
    plan = _plan(FILES)
    target = _warm(plan, tmp_path) if warm else materialise(plan, tmp_path)
    if not warm:
        from runner.core import materialize

        materialize._verified.pop(target, None)  # a new process: nothing remembered
    PLANTINGS[plant](target)
    assert _listing(target) != _expected(FILES)
    with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
        assert materialise(plan, tmp_path) == target
    assert _listing(target) == _expected(FILES), "exactly the plan's files, the marker and their directories"
    assert (target / "format_bytes.py").read_text() == FORMAT_BYTES
    assert any("does not list" in r.getMessage() and str(target) in r.getMessage() for r in caplog.records)
    assert not [p for p in tmp_path.joinpath("tools").iterdir() if p != target], "nothing left aside"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
        assert materialise(plan, tmp_path) == target
    assert not caplog.records, "a clean directory is used as it is"


def test_the_planted_module_is_not_imported_by_the_next_run(tmp_path: Path) -> None:
    """The attack as found, with a real interpreter run in the tool's directory."""
    plan = _plan({"format_bytes.py": FORMAT_BYTES})
    target = _warm(plan, tmp_path)
    _plant_file(target)
    target.chmod(0o555)
    target = materialise(plan, tmp_path)
    done = subprocess.run(
        [sys.executable, "-B", "format_bytes.py"], cwd=target, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "clean", done.stdout


def test_files_are_read_only_and_directories_0555(tmp_path: Path) -> None:
    target = materialise(_plan(FILES), tmp_path)
    mode = {rel: stat.S_IMODE(os.lstat(target / rel.rstrip("/")).st_mode) for rel in _expected(FILES)}
    assert mode == {"format_bytes.py": 0o555, "lib/units.py": 0o444, COMPLETE: 0o444, "lib/": 0o555}
    assert stat.S_IMODE(target.stat().st_mode) == 0o555


def test_a_listed_file_replaced_by_a_symlink_to_the_same_bytes_is_written_again(tmp_path: Path) -> None:
    """Same content today, but the link's target could change after the check."""
    plan = _plan(FILES)
    target = _warm(plan, tmp_path)
    elsewhere = tmp_path / "units.py"
    elsewhere.write_text(HELPER)
    _writable(target / "lib")
    (target / "lib" / "units.py").unlink()
    (target / "lib" / "units.py").symlink_to(elsewhere)
    assert materialise(plan, tmp_path) == target
    assert not (target / "lib" / "units.py").is_symlink()
    assert _listing(target) == _expected(FILES)


def test_a_listed_file_changed_and_an_unlisted_one_planted_leave_only_the_plan(tmp_path: Path) -> None:
    """Unlisted entries are looked for first: the whole directory is written again from the
    plan, which also replaces the changed file; a changed file alone is still refused."""
    plan = _plan(FILES)
    target = _warm(plan, tmp_path)
    (target / "lib" / "units.py").write_text("evil = 1\n")
    with pytest.raises(IntegrityError, match="changed on disk"):
        materialise(plan, tmp_path)
    _plant_file(target)
    assert materialise(plan, tmp_path) == target
    assert (target / "lib" / "units.py").read_text() == HELPER


def _as_nobody(*args: str) -> subprocess.CompletedProcess[str] | None:
    """`python3 -B -c ...` run as `nobody` with the repository importable (None: this machine
    cannot: not root, no runuser, or no interpreter and checkout that user may read)."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if os.geteuid() != 0 or not shutil.which("runuser") or python is None:
        return None
    command = ["runuser", "-u", "nobody", "--", python, "-B", "-c"]
    probe = subprocess.run(
        [*command, f"import sys; sys.path.insert(0, {str(ROOT)!r}); import runner.core.materialize"],
        capture_output=True,
    )
    if probe.returncode != 0:
        return None
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


AS_NOBODY = f"""
import hashlib, os, sys, uuid
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from runner.core.plan import Plan, PlanFile
from runner.core.materialize import materialise
text = {FORMAT_BYTES!r}
plan = Plan(tool_id="t", version="1", tool_type="script", content_hash=uuid.uuid4().hex * 2, primitive=None,
            executor_id=None, chain=[], config={{}}, parameters=None,
            files=[PlanFile("lib/f.py", hashlib.sha256(text.encode()).hexdigest(), len(text), True, text)])
root = Path(sys.argv[1])
target = materialise(plan, root)
try:
    (target / "humanize.py").write_text("x")
    print("wrote")
except PermissionError:
    print("refused")
os.chmod(target / "lib", 0o755)
(target / "lib" / "humanize.py").write_text("x")
os.chmod(target / "lib", 0o555)
again = materialise(plan, root)
print(sorted(str(p.relative_to(again)) for p in again.rglob("*")))
print(sorted(p.name for p in (root / "tools").iterdir()) == [again.name])
"""


def test_as_an_ordinary_user_a_tool_cannot_write_there_and_the_runner_still_sweeps() -> None:
    """Modes bind only a user who is not root: the same checks, as `nobody` in a cache it owns."""
    cache = Path(tempfile.mkdtemp(prefix="kiwi-nobody-"))  # /tmp: a path nobody can reach
    try:
        cache.chmod(0o755)
        shutil.chown(cache, "nobody")
        done = _as_nobody(AS_NOBODY, str(cache))
        if done is None:
            pytest.skip("cannot run a Python of this checkout as nobody here")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["refused", "['.kiwi-complete', 'lib', 'lib/f.py']", "True"], done.stdout
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(cache)], check=False)
        shutil.rmtree(cache, ignore_errors=True)
