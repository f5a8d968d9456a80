"""The directory of a runner's own sandbox files (its /etc, the seccomp filter), one per process.

It lives in the system's temporary directory and goes with the runner: removed when the
runner closes its sandbox or its interpreter exits, and, for a runner that could do neither
(killed by SIGKILL, a crash), by the next runner of the same uid that starts one. Each owner
holds a lock on its directory for as long as it lives (a forked `kiwi agent` call shares it),
and marks the directory only once the lock is held: a marked directory whose lock is free
belongs to no live process. A directory without the mark is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import weakref
from pathlib import Path

_MARK = ".locked"  # written once the owner holds the directory's lock


def prefix() -> str:
    return f"kiwi-sandbox-{os.getuid()}-"


class StateDir:
    """A new locked directory for this process's sandbox files."""

    def __init__(self) -> None:
        sweep()
        self.path = Path(tempfile.mkdtemp(prefix=prefix()))
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and ours: nobody else holds it
        (self.path / _MARK).touch(mode=0o600)
        self._finalizer = weakref.finalize(self, _remove, self.path, fd)

    def remove(self) -> None:
        """Remove it now (once; later calls do nothing)."""
        self._finalizer()

    def keep(self) -> None:
        """Leave it to whoever shares it (kiwi agent removes it itself when it stops); the lock
        stays held while this process lives."""
        self._finalizer.detach()


def sweep(tmp: Path | None = None) -> list[Path]:
    """Remove the marked directories of runners that died (their lock is free): what returns."""
    removed = []
    for d in (tmp or Path(tempfile.gettempdir())).glob(prefix() + "*"):
        try:
            st = os.lstat(d)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or not (d / _MARK).is_file():
                continue
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held: its owner lives
            continue
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
        removed.append(d)
    return removed


def _remove(path: Path, fd: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.close(fd)
