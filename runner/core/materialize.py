"""A plan's files become a directory addressed by the version's content_hash.

Identical versions share the directory. Every file is checked against the sha256 the
registry recorded, both as it arrives in the plan (so a row altered in the database is
refused; the plan as a whole was checked against its content_hash before: integrity.py)
and on disk when a cached directory is reused, by content; every path must stay inside
the directory. A directory appears complete or not at all (written aside, renamed).

The directory is shared by every run of the version, whoever runs it, so it must hold the
plan's files and nothing else: a file planted beside them (a module the entrypoint imports, a
`__pycache__`) would run as part of the next caller's tool. A cached directory holding
anything the plan does not list (a file, a directory, a symlink, a fifo; the runner's own
`.kiwi-complete` marker and the directories of listed files aside) is removed and written
again from the plan, with a warning. A listed file changed on disk is still refused
(IntegrityError): that is damage to report, not litter to sweep. The files are written
read-only (0444, the entrypoint 0555) and the directories 0555, so a tool cannot write there
without first changing a mode, which the checks see; the runner makes a tree writable again
before it removes it.
Whatever a plan holds, a failure here is a KiwiError naming the file: a path that is both
a file and another file's directory, a name the filesystem cannot hold, a full disk.

The file a tool runs (`{entrypoint}`) is `config.entrypoint` when the merged config names
one (the design documents' key, for a tool of one file or of many), else the file publish
marked `is_entrypoint`: entrypoint_file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, IntegrityError, Refused
from .identity import ByIdentity
from .plan import Plan, PlanFile

logger = logging.getLogger("kiwi.runner")

COMPLETE = ".kiwi-complete"
FILE_MODE, ENTRY_MODE, DIR_MODE = 0o444, 0o555, 0o555

# Directories this process has checked, with the (inode, size, mtime, ctime) of each file
# and of each directory (the tool's own and those holding its files), and the sha256s the
# files matched: a warm run stats them instead of listing, reading and hashing them again.
# A directory's mtime and ctime move whenever an entry is added, removed or renamed in it,
# so an unchanged stamp means an unchanged listing. Size and mtime alone can be kept by an
# edit (`os.utime` puts mtime back); ctime cannot be set from user space and moves on every
# write, chmod or rename, so any change is checked again and, if the bytes differ, refused.
# A stamp is remembered only once its ctime is older than RACY_NS: a filesystem's clock is
# coarse (a tick of some ms), so a write within the same tick as the check could otherwise
# keep the ctime it saw (git's "racily clean" entries, handled the same way).
Stamp = tuple[int, int, int, int]
RACY_NS = 50_000_000
_verified: dict[Path, tuple[tuple[Stamp, ...], tuple[str, ...]]] = {}
_paths: dict[Path, tuple[str, ...]] = {}


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


def _content(f: PlanFile, root: Path | None = None) -> bytes:
    """A file's bytes, checked against its sha256: inline, or (a file kept in Supabase Storage)
    from the cache's blobs, where the runner put it once fetched (registry/storage.py)."""
    if f.content_text is None:
        blob = root / "blobs" / f.sha256 if root is not None and f.storage_key is not None else None
        if blob is None or not blob.is_file():
            raise Refused(
                f"file {f.path} has no inline content and was not fetched (storage_key {f.storage_key!r})",
                hint="a file kept in Storage is fetched before its tool runs; run the tool again",
            )
        data = blob.read_bytes()
        where = f"its copy in {blob}"
    else:
        data = f.content_text.encode("utf-8")
        where = "the registry row was altered after publishing"
    digest = hashlib.sha256(data).hexdigest()
    if digest != f.sha256:
        raise IntegrityError(
            f"file {f.path} does not match its sha256 (recorded {f.sha256[:12]}…, content {digest[:12]}…)",
            hint=f"{where}; republish the tool" if f.content_text is not None else f"remove {where} and run again",
        )
    return data


def _checked(plan: Plan) -> dict[str, PlanFile]:
    """The plan's files by their safe relative paths, each matching its sha256, none a directory of
    another. A plan is immutable, so this holds for as long as the plan object lives: it is
    remembered by identity (a cached plan's warm run neither re-encodes nor rehashes its files;
    the files on disk are still checked on every run)."""
    files = {str(safe_relative(f.path)): f for f in plan.files}
    for f in files.values():
        if f.content_text is not None or f.storage_key is None:  # a stored file is checked as it is read
            _content(f)
    _clashes(list(files))
    return files


_checked_plan = ByIdentity(_checked)


def materialise(plan: Plan, root: Path) -> Path:
    """The directory holding the plan's files and nothing else, written if needed. Raises
    IntegrityError when a listed file was changed on disk; anything unlisted is swept away by
    writing the directory again."""
    contents = _checked_plan(plan)
    target = root / "tools" / plan.content_hash
    if _unchanged(target, contents):  # the warm path: every stamp as when it was last checked
        return target
    if (target / COMPLETE).exists():
        unlisted = _verify_on_disk(target, contents)
        if not unlisted:
            return target
        shown = ", ".join(repr(rel) for rel in unlisted[:5]) + (", …" if len(unlisted) > 5 else "")
        logger.warning(
            "the cached tool directory %s holds %d entr%s the plan does not list (%s): written again",
            target,
            len(unlisted),
            "y" if len(unlisted) == 1 else "ies",
            shown,
        )
        _discard(target)
    _write(target, contents, entrypoint_file(plan), plan.content_hash, root)
    unlisted = _verify_on_disk(target, contents)
    if unlisted:
        raise IntegrityError(
            f"{target} held {len(unlisted)} entries the plan does not list right after it was written",
            hint="something else writes into the runner's cache directory (KIWI_CACHE_DIR); stop it and run again",
        )
    return target


def _write(target: Path, contents: dict[str, PlanFile], entry: PlanFile | None, content_hash: str, root: Path) -> None:
    """Write the files aside, read-only, and rename the directory into place (unless another
    process did first: its complete directory is kept, and checked by the caller)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{content_hash[:16]}-", dir=target.parent))
    except OSError as e:
        raise _unwritable(None, e) from e
    try:
        for rel, f in contents.items():
            dest = staging / rel
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(_content(f, root))
                dest.chmod(ENTRY_MODE if f is entry else FILE_MODE)
            except OSError as e:
                raise _unwritable(rel, e) from e
        try:
            (staging / COMPLETE).write_text(content_hash + "\n")
            (staging / COMPLETE).chmod(FILE_MODE)
            for rel in _directories(contents):
                (staging / rel).chmod(DIR_MODE)
            staging.chmod(DIR_MODE)
            try:
                os.rename(staging, target)
            except OSError:
                if not (target / COMPLETE).exists():  # someone else's incomplete directory: replace it
                    _remove(target)
                    os.rename(staging, target)
        except OSError as e:
            raise _unwritable(None, e) from e
    finally:
        if staging.exists():
            _remove(staging)


def _discard(target: Path) -> None:
    """Take a cached directory out of use (renamed aside, so a concurrent run sees it whole or
    not at all) and remove it."""
    aside = target.parent / f".{target.name[:16]}-stale-{os.urandom(8).hex()}"
    try:
        os.rename(target, aside)
    except FileNotFoundError:
        return  # another process discarded it first
    except OSError as e:
        raise _unwritable(None, e) from e
    _remove(aside)


def _remove(path: Path) -> None:
    """rmtree of a tree the runner made read-only: every directory in it is made writable first
    (symlinks are neither followed nor changed)."""
    with contextlib.suppress(OSError):
        if not path.is_symlink():
            path.chmod(0o700)
    for top, dirs, _ in os.walk(path):  # top-down: a directory is writable before it is entered
        for name in dirs:
            child = Path(top, name)
            with contextlib.suppress(OSError):
                if not child.is_symlink():
                    child.chmod(0o700)
    shutil.rmtree(path, ignore_errors=True)


def _layout(contents: dict[str, PlanFile]) -> tuple[str, ...]:
    """The directories holding the plan's files, relative to the tool's directory, deepest first."""
    found = {str(parent) for rel in contents for parent in PurePosixPath(rel).parents if str(parent) != "."}
    return tuple(sorted(found, key=lambda d: (-d.count("/"), d)))


_directories = ByIdentity(_layout)


def _unlisted(target: Path, contents: dict[str, PlanFile]) -> list[str]:
    """What the directory holds besides the plan's files (each a regular file), the directories
    holding them and the marker; a directory that cannot be listed counts as unlisted."""
    dirs = set(_directories(contents))
    found: list[str] = []
    try:  # written by an older runner (0700): a sandbox's user could not enter it
        if stat.S_IMODE(os.lstat(target).st_mode) != DIR_MODE:
            found.append("(the directory's own mode)")
    except OSError:
        found.append(".")
    pending = [""]
    while pending:
        where = pending.pop()
        try:
            with os.scandir(target / where) as entries:
                for e in entries:
                    rel = f"{where}/{e.name}" if where else e.name
                    if e.is_dir(follow_symlinks=False) and rel in dirs:
                        pending.append(rel)
                    elif not (e.is_file(follow_symlinks=False) and (rel in contents or rel == COMPLETE)):
                        found.append(rel)
        except OSError:
            found.append(where or ".")
    return found


def _signature(target: Path, contents: dict[str, PlanFile]) -> tuple[Stamp, ...] | None:
    """The stamps of the listed files, then of the directories holding them, then of the tool's
    directory (lstat: a symlink is stamped as itself)."""
    paths = _paths.get(target)
    if paths is None:  # a version's content_hash names its files: the same paths on every run
        paths = _paths[target] = (*(str(target / rel) for rel in (*contents, *_directories(contents))), str(target))
    try:
        stats = [os.lstat(path) for path in paths]
    except OSError:
        return None
    return tuple((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in stats)


def _unchanged(target: Path, contents: dict[str, PlanFile]) -> bool:
    """Checked before by this process, and no file or directory stamp has moved since (the
    marker's presence is in the tool directory's own stamp)."""
    kept = _verified.get(target)
    if kept is None or kept[1] != tuple(f.sha256 for f in contents.values()):
        return False
    return _signature(target, contents) == kept[0]


def _verify_on_disk(target: Path, contents: dict[str, PlanFile]) -> list[str]:
    """What the directory holds that the plan does not list (nothing: it may be used), once every
    listed file hashes to the plan's sha256. The plan itself already matched its content_hash, so
    a mismatch is the disk's (a cached copy edited or damaged): an IntegrityError. (The caller
    has already found it not _unchanged: nothing here is skipped.)"""
    shas = tuple(f.sha256 for f in contents.values())
    signature = _signature(target, contents)
    unlisted = _unlisted(target, contents)
    if unlisted:
        return unlisted
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
    return []
