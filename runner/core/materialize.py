"""A plan's files become a directory addressed by the version's content_hash.

Identical versions share the directory. Every file is checked against the sha256 the
registry recorded, both as it arrives in the plan (so a row altered in the database is
refused; the plan as a whole was checked against its content_hash before: integrity.py)
and on disk when a cached directory is reused, by content; every path must stay inside
the directory. A directory appears complete or not at all (written aside, renamed).
Whatever a plan holds, a failure here is a KiwiError naming the file: a path that is both
a file and another file's directory, a name the filesystem cannot hold, a full disk.

The file a tool runs (`{entrypoint}`) is `config.entrypoint` when the merged config names
one (the design documents' key, for a tool of one file or of many), else the file publish
marked `is_entrypoint`: entrypoint_file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, IntegrityError, Refused
from .identity import ByIdentity
from .plan import Plan, PlanFile

COMPLETE = ".kiwi-complete"

# Directories this process has hashed, with each file's (inode, size, mtime, ctime) and
# the sha256s they matched: a warm run stats its files instead of reading and hashing
# them again. Size and mtime alone can be kept by an edit (`os.utime` puts mtime back);
# ctime cannot be set from user space and moves on every write, chmod or rename, so any
# change is hashed again and, if the bytes differ, refused.
# A stamp is remembered only once its ctime is older than RACY_NS: a filesystem's clock is
# coarse (a tick of some ms), so a write within the same tick as the check could otherwise
# keep the ctime it saw (git's "racily clean" entries, handled the same way).
Stamp = tuple[int, int, int, int]
RACY_NS = 50_000_000
_verified: dict[Path, tuple[tuple[Stamp, ...], tuple[str, ...]]] = {}


def is_safe_relative(path: str) -> bool:
    """No absolute path, `..`, NUL, backslash or empty name: a file can never land outside its
    directory. (Writing into a local space, spaces.py adds its own stricter rules.)"""
    p = PurePosixPath(path)
    return not (not path or "\x00" in path or "\\" in path or p.is_absolute() or any(x in ("..", "") for x in p.parts))


def safe_relative(path: str) -> PurePosixPath:
    """A plan's file path, refused unless it is safe (is_safe_relative) and not reserved."""
    p = PurePosixPath(path)
    if not is_safe_relative(path):
        raise Refused(f"unsafe file path in the plan: {path!r}")
    if p.parts and p.parts[0].lower() == COMPLETE:
        raise Refused(f"reserved file name in the plan: {path!r}")
    return p


def entrypoint_file(plan: Plan) -> PlanFile | None:
    """The file the tool runs: the one `config.entrypoint` names, else the one marked is_entrypoint.
    config.entrypoint must be a relative path inside the tool (`./x` is `x`) that is one of the
    plan's files; anything else is a ConfigError naming the field."""
    named = plan.config.get("entrypoint")
    if named is None:
        return plan.entrypoint
    tool = plan.tool_id
    if not isinstance(named, str) or not named:
        raise ConfigError(f"{tool}: config.entrypoint must be the path of one of the tool's files, not {named!r}")
    if not is_safe_relative(named):
        raise ConfigError(
            f"{tool}: config.entrypoint {named!r} must be a relative path inside the tool",
            hint="name one of the tool's files, without '..', a leading '/' or a backslash",
        )
    path = str(PurePosixPath(named))
    found = next((f for f in plan.files if f.path == path), None)
    if found is None:
        paths = [f.path for f in plan.files]
        listed = ", ".join(paths[:10]) + (", …" if len(paths) > 10 else "") if paths else "it has none"
        raise ConfigError(
            f"{tool}: config.entrypoint {named!r} is not one of the tool's files ({listed})",
            hint="set config.entrypoint to the path of the file the tool runs, as published",
        )
    return found


def _clashes(paths: list[str]) -> None:
    """Refuse a plan in which one file is also a directory of another ("x" beside "x/y")."""
    files = set(paths)
    for rel in paths:
        for parent in PurePosixPath(rel).parents:
            if str(parent) in files:
                raise Refused(
                    f"file {parent} in the plan is also the directory of {rel}",
                    hint="the tool's files cannot all be written; its publisher must rename one",
                )


def _unwritable(rel: str | None, e: OSError) -> Refused:
    where = f"file {rel!r} of the tool" if rel else "the tool's directory"
    return Refused(
        f"cannot write {where}: {e.strerror or e}",
        hint="a name too long for this filesystem, a full disk or an unwritable cache directory (KIWI_CACHE_DIR)",
    )


def _content(f: PlanFile) -> bytes:
    if f.content_text is None:
        raise Refused(
            f"file {f.path} has no inline content (storage_key {f.storage_key!r})",
            hint="this runner materialises text files only",
        )
    data = f.content_text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if digest != f.sha256:
        raise IntegrityError(
            f"file {f.path} does not match its sha256 (recorded {f.sha256[:12]}…, content {digest[:12]}…)",
            hint="the registry row was altered after publishing; republish the tool",
        )
    return data


def _checked(plan: Plan) -> dict[str, PlanFile]:
    """The plan's files by their safe relative paths, each matching its sha256, none a directory of
    another. A plan is immutable, so this holds for as long as the plan object lives: it is
    remembered by identity (a cached plan's warm run neither re-encodes nor rehashes its files;
    the files on disk are still checked on every run)."""
    files = {str(safe_relative(f.path)): f for f in plan.files}
    for f in files.values():
        _content(f)
    _clashes(list(files))
    return files


_checked_plan = ByIdentity(_checked)


def materialise(plan: Plan, root: Path) -> Path:
    """The directory holding the plan's files, written if needed. Raises IntegrityError on a mismatch."""
    contents = _checked_plan(plan)
    entry = entrypoint_file(plan)
    target = root / "tools" / plan.content_hash
    if (target / COMPLETE).exists():
        _verify_on_disk(target, contents)
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{plan.content_hash[:16]}-", dir=target.parent))
    except OSError as e:
        raise _unwritable(None, e) from e
    try:
        for rel, f in contents.items():
            dest = staging / rel
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(_content(f))
                dest.chmod(0o755 if f is entry else 0o644)
            except OSError as e:
                raise _unwritable(rel, e) from e
        try:
            (staging / COMPLETE).write_text(plan.content_hash + "\n")
            try:
                os.rename(staging, target)
            except OSError:
                if not (target / COMPLETE).exists():  # someone else's incomplete directory: replace it
                    shutil.rmtree(target, ignore_errors=True)
                    os.rename(staging, target)
        except OSError as e:
            raise _unwritable(None, e) from e
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    _verify_on_disk(target, contents)
    return target


def _signature(target: Path, rels: list[str]) -> tuple[Stamp, ...] | None:
    try:
        stats = [os.stat(target / rel) for rel in rels]
    except OSError:
        return None
    return tuple((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in stats)


def _verify_on_disk(target: Path, contents: dict[str, PlanFile]) -> None:
    """Every file on disk hashes to the plan's sha256 (the plan itself already matched its
    content_hash, so a mismatch here is the disk's: a cached copy edited or damaged)."""
    shas = tuple(f.sha256 for f in contents.values())
    signature = _signature(target, list(contents))
    if signature is not None and _verified.get(target) == (signature, shas):
        return
    for rel, f in contents.items():
        path = target / rel
        try:
            data = path.read_bytes()
        except OSError as e:
            raise IntegrityError(f"materialised file {rel} is unreadable: {e.strerror}") from e
        if hashlib.sha256(data).hexdigest() != f.sha256:
            raise IntegrityError(
                f"materialised file {rel} in {target} was changed on disk",
                hint=f"remove {target} and run again: the registry's copy was checked against its content_hash",
            )
    if signature is not None and max(st[3] for st in signature) < time.time_ns() - RACY_NS:
        _verified[target] = (signature, shas)
