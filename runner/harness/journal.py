"""Run records and audit rows on local disk until the registry has them.

The recorder (recorder.py) writes records behind the reply, so a process killed right after
answering would take its queued records with it. Each record is therefore appended to this
journal before the call returns (one `write` to a file opened O_APPEND: it is in the
kernel's page cache, so a killed process loses nothing; a machine that loses power may
lose what the kernel had not yet flushed, as no fsync is made). Once the registry has
stored a record, its line is no longer needed: a journal segment whose records are all
stored is emptied (or deleted, once a newer one is in use).

    <cache_dir>/journal/<registry key>/<pid>-<n>.jsonl     one line per call:
        <mac> {"id", "kind": "run" | "audit", "as": {"role", "claims", "source"} | null, "record",
               "then": [{"id", "kind", "record"}]}      (a run's audit row rides with its record)
    <cache_dir>/keys/journal.key                           the runner's key (32 random bytes, 0600)

The registry key is a digest of where the records go (the backend's repr: its database URL
with the password masked), so a journal is only ever replayed into the registry it was
written for. Every segment is held with an exclusive flock by the process writing it; a
segment whose lock can be taken belongs to a process that ended without emptying it (it
was killed, or the registry was unreachable until it stopped). `adopt()` reads such
segments, for the recorder to write their records again under the ids they were given
(a record the registry already has is known by its id, and not stored twice), appends
them to this process's own segment, and deletes the orphan.

The principal a record was written as is kept as its role and claims, never its token:
the Postgres backend acts on claims, so a replayed record names the same caller. The
files are created 0600 in the user's own cache directory.

A replayed line is stored as whoever it names, so a line the runner did not write must never
be replayed: a tool that could append two lines to a segment had them stored as another user
and as service_role. Every line therefore starts with its MAC, an HMAC-SHA256 (in hex) under a
key only the runner holds, over the journal's registry key and the line's JSON exactly as it
follows the MAC, so what is verified is byte for byte what is parsed: changing any field, the
principal included, or moving a line to another registry's journal breaks it. (Lines of the
earlier form, one canonical JSON object carrying its MAC as "mac", are still read.) The key
is 32 random bytes made once per cache directory (written aside with O_CREAT|O_EXCL, 0600,
linked into place, in a 0700 directory apart from the journal's, so a sandbox can hide it
while exposing nothing else) and read once per process. `adopt()` keeps only the lines whose
MAC verifies; the others (no MAC, a wrong one, one made under another key, a line altered
after it was written, and every line of a journal written before lines were signed) are
dropped and counted, with one warning per segment naming it and the count, never a line's
content.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import json
import logging
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from ..principal import Principal

__all__ = ["Journal", "Journaled", "journal_for"]

logger = logging.getLogger("kiwi.runner")

ROTATE_LINES = 2000  # a segment still holding unwritten records is replaced after this many lines
KEY_BYTES = 32
MAC_CONTEXT = b"kiwi-journal-line-v2\n"  # a MAC made for a journal line is good for nothing else
_V1_CONTEXT = b"kiwi-journal-line-v1\n"  # ... nor one made for a line of the earlier form


@dataclass(frozen=True)
class Journaled:
    """A record read back from an orphaned segment."""

    record_id: str
    kind: str
    principal: Principal | None
    record: dict[str, Any]
    segment: int | None = None  # where this process's journal now holds it


# The backends whose records outlive the process (their repr names the registry: a database
# URL with its password masked). Only Postgres: it acts on a record's role and claims, so a
# replayed record is written as the caller who made it. The REST backend needs the caller's
# token, which is never kept, so it would write a replayed record as somebody else (or not at
# all); its records stay in memory, as before. A registry in memory has none.
JOURNALED_BACKENDS = ("PostgresBackend",)


def journal_for(cache_dir: Path, backend: Any) -> Journal | None:
    """The journal of the registry `backend` writes to, under the cache directory (None: a
    backend whose records are not kept, such as the in-memory one of unit tests)."""
    if type(backend).__name__ not in JOURNALED_BACKENDS:
        return None
    cache = Path(cache_dir)
    return Journal(cache / "journal" / hashlib.sha256(repr(backend).encode()).hexdigest()[:16], key_file_in(cache))


def key_file_in(cache_dir: Path) -> Path:
    """Where the runner's journal key is kept, beside (not inside) the journals."""
    return Path(cache_dir) / "keys" / "journal.key"


class KeyUnusable(OSError):
    """The key file exists but cannot be trusted (another owner, readable by others, wrong size)."""


_keys: dict[Path, bytes] = {}


def load_key(path: Path) -> bytes:
    """The runner's journal key, made on first use and read once per process. Raises OSError
    (KeyUnusable for a key file that may not be secret)."""
    key = _keys.get(path)
    if key is None:
        key = _keys[path] = _read_key(path) or _make_key(path)
    return key


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise KeyUnusable(f"the journal key {path} must be a file of this user, readable by it alone (0600)")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise KeyUnusable(f"the journal key {path} is not {KEY_BYTES} bytes long")
    return key


def _make_key(path: Path) -> bytes:
    """Write a new key aside (O_CREAT|O_EXCL, 0600) and link it into place, so no process ever
    reads a key half written; a process that linked one first wins, and its key is read."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        key = os.urandom(KEY_BYTES)
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(aside, path)
    except FileExistsError:
        key = _read_key(path) or b""
    finally:
        aside.unlink(missing_ok=True)
    if len(key) != KEY_BYTES:
        raise KeyUnusable(f"the journal key {path} vanished while it was made")
    return key


# One encoder for every line (json.dumps with options builds a new one per call): compact,
# ASCII only (a line holds no raw newline or U+2028), and what JSON cannot hold as its str().
_LINE = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=True)
# orjson says the same in a tenth of the time; what it would say otherwise goes to _LINE.
_ORJSON_AS_JSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)  # the earlier form's
MAC_HEX = 64  # hexdigits of an HMAC-SHA256


def _signed(key: bytes, scope: str, text: bytes, context: bytes = MAC_CONTEXT) -> bytes:
    """The MAC of a line's JSON text in the journal of registry key `scope`, in hex."""
    mac = _keyed(key, context + scope.encode() + b"\n").copy()
    mac.update(text)
    return mac.hexdigest().encode()


@functools.lru_cache(maxsize=16)
def _keyed(key: bytes, prefix: bytes) -> hmac.HMAC:
    """HMAC-SHA256 under `key`, fed a journal's prefix once: each line's MAC goes on from a copy
    (the same MAC as hmac.digest of prefix and text, without keying and fetching SHA-256 again:
    half the cost of a line's signature, and every call writes two lines)."""
    return hmac.new(key, prefix, hashlib.sha256)


def json_text(value: Any) -> str:
    """`value` as a line holds it, the text _LINE makes or one parsing to the same value: by
    orjson when its text is ASCII (most records are), else by _LINE (text beyond ASCII, a number
    beyond 64 bits, a key that is not text, nesting orjson refuses). Dates and dataclasses go to
    str(), as _LINE has them; a NaN or an infinity, which no record holds (jsonb refuses them),
    would be null."""
    try:
        raw = orjson.dumps(value, default=str, option=_ORJSON_AS_JSON)
    except (orjson.JSONEncodeError, TypeError):
        return _LINE.encode(value)
    return raw.decode() if raw.isascii() else _LINE.encode(value)


def encode_line(key: bytes, scope: str, line: dict[str, Any]) -> bytes:
    """A journal line, signed: its MAC, a space, the line's JSON (one encoding, of which the MAC
    is taken as it is written), a newline. A reader verifies the very text it then parses."""
    return signed_line(key, scope, json_text(line))


def signed_line(key: bytes, scope: str, json_text: str) -> bytes:
    """encode_line() of a line whose JSON text is made already (ASCII, as _LINE makes it)."""
    text = json_text.encode()
    return _signed(key, scope, text) + b" " + text + b"\n"


def verified(key: bytes, scope: str, raw: bytes) -> dict[str, Any] | None:
    """The parsed line if its MAC is this key's for this journal (None: unsigned, forged or
    altered). Raises ValueError for a line that is not a JSON object."""
    raw = raw.rstrip(b"\n")
    if raw[:1] == b"{":
        return _verified_canonical(key, scope, raw)
    mac, space, text = raw[:MAC_HEX], raw[MAC_HEX : MAC_HEX + 1], raw[MAC_HEX + 1 :]
    if space != b" " or not hmac.compare_digest(mac, _signed(key, scope, text)):
        json.loads(text)  # a line cut short by a crash is unreadable (ValueError), not forged
        return None
    line = json.loads(text)
    if not isinstance(line, dict):
        raise ValueError("not a JSON object")
    return line


def _verified_canonical(key: bytes, scope: str, raw: bytes) -> dict[str, Any] | None:
    """A line of the earlier form: one JSON object, its MAC under "mac" over the canonical JSON
    (sorted keys, no spaces) of the rest, under its own context."""
    line = json.loads(raw)
    if not isinstance(line, dict):
        raise ValueError("not a JSON object")
    mac = line.pop("mac", None)
    expected = _signed(key, scope, _CANONICAL.encode(line).encode(), _V1_CONTEXT).decode()
    if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
        return None
    return line


def _principal_json(principal: Principal | None) -> dict[str, Any] | None:
    if principal is None:
        return None
    return {"role": principal.role, "claims": dict(principal.claims), "source": principal.source}


def _principal_of(data: Any) -> Principal | None:
    if not isinstance(data, dict):
        return None
    return Principal(str(data["role"]), dict(data.get("claims") or {}), str(data.get("source") or "journal"))


class _Segment:
    """One journal file, locked by this process for as long as it is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.lines = 0
        self.outstanding = 0

    def close(self, *, delete: bool) -> None:
        if delete:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self.fd)


class Journal:
    def __init__(self, directory: Path, key_file: Path) -> None:
        self.directory = directory
        self.key_file = key_file
        self._key: bytes | None = None
        self._segments: dict[int, _Segment] = {}
        self._current = -1
        self._broken = False

    @property
    def enabled(self) -> bool:
        return not self._broken

    def append(self, record_id: str, kind: str, principal: Principal | None, record: dict[str, Any]) -> int | None:
        """Put the record on disk before the call returns; the segment it is in (None: not journaled,
        the disk refused; the record is then only in memory, as before, and that is logged once)."""
        return self.append_texts(principal, [(record_id, kind, record)])[0]

    def append_texts(
        self, principal: Principal | None, records: list[tuple[str, str, dict[str, Any]]]
    ) -> tuple[int | None, list[str | None]]:
        """append() of records made by one call (a run's record and its audit row), in one line and
        one write: the segment (None: not journaled), and each record's JSON text as the line holds
        it (None when not journaled), the record being encoded once, for the journal and for the
        registry's write. The first record heads the line; the others follow under "then"."""
        if self._broken or not records:
            return None, [None] * len(records)
        (record_id, kind, _), rest = records[0], records[1:]
        head = {"id": record_id, "kind": kind, "as": _principal_json(principal)}
        try:
            texts = [json_text(record) for _, _, record in records]
            line = f'{json_text(head)[:-1]},"record":{texts[0]}'
            if rest:
                then = ",".join(
                    f'{json_text({"id": rid, "kind": k})[:-1]},"record":{text}}}'
                    for (rid, k, _), text in zip(rest, texts[1:], strict=True)
                )
                line += f',"then":[{then}]'
            data = signed_line(self._signing_key(), self.directory.name, line + "}")
            segment = self._writable()
            os.write(segment.fd, data)
        except OSError as e:
            self._broken = True
            logger.warning("the run journal in %s cannot be written (%s): records only in memory", self.directory, e)
            return None, [None] * len(records)
        segment.lines += 1
        segment.outstanding += len(records)
        return self._current, list(texts)

    def stored(self, segment: int | None) -> None:
        """One record of `segment` is in the registry (or will never be: refused for good)."""
        found = self._segments.get(segment) if segment is not None else None
        if segment is None or found is None:
            return
        found.outstanding -= 1
        if found.outstanding > 0:
            return
        if segment == self._current:
            with contextlib.suppress(OSError):  # all of it stored: start it again from empty
                os.ftruncate(found.fd, 0)
                found.lines = 0
        else:
            found.close(delete=True)
            del self._segments[segment]

    def _signing_key(self) -> bytes:
        if self._key is None:
            self._key = load_key(self.key_file)
        return self._key

    def adopt(self) -> list[Journaled]:
        """The records of segments no running process holds (their writer ended first), read
        and removed from disk after they are appended to this process's own segment. Only the
        lines this runner's key authenticates are kept (module docstring)."""
        if self._broken or not self.directory.is_dir():
            return []
        try:
            key = self._signing_key()
        except OSError as e:
            self._broken = True
            logger.warning("the run journal key %s is unusable (%s): records only in memory", self.key_file, e)
            return []
        mine = {s.path for s in self._segments.values()}
        found: list[Journaled] = []
        for path in sorted(self.directory.glob("*.jsonl")):
            if path in mine:
                continue
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # adopted by another process meanwhile
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its writer is alive
                theirs = [
                    replace(item, segment=self.append(item.record_id, item.kind, item.principal, item.record))
                    for item in _read(path, key, self.directory.name)
                ]
                if not self._broken:
                    path.unlink(missing_ok=True)
                found += theirs
            finally:
                os.close(fd)
        return found

    def close(self) -> None:
        """Close the segments; empty ones are deleted, the others stay for the next start."""
        for segment in self._segments.values():
            segment.close(delete=segment.outstanding == 0)
        self._segments.clear()

    def _writable(self) -> _Segment:
        current = self._segments.get(self._current)
        if current is not None and (current.lines < ROTATE_LINES or current.outstanding == 0):
            return current
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        previous = self._current
        self._current += 1
        while True:
            path = self.directory / f"{os.getpid()}-{self._current}.jsonl"
            if not path.exists():
                break
            self._current += 1  # left by an earlier process of the same pid
        self._segments[self._current] = _Segment(path)
        if current is not None and current.outstanding == 0:
            current.close(delete=True)
            del self._segments[previous]
        return self._segments[self._current]


def _read(path: Path, key: bytes, scope: str) -> list[Journaled]:
    """The authenticated lines of a segment. A line cut short by the crash is skipped as
    unreadable; a line without this key's MAC is dropped; each kind is counted in one warning."""
    found = []
    unreadable = dropped = 0
    for raw in path.read_bytes().splitlines():
        try:
            line = verified(key, scope, raw)
            if line is None:
                dropped += 1
                continue
            principal = _principal_of(line.get("as"))
            for item in [line, *line.get("then", ())]:  # a run's record, and the audit row written with it
                found.append(Journaled(str(item["id"]), str(item["kind"]), principal, item["record"]))
        except (ValueError, KeyError, TypeError):
            unreadable += 1
    if dropped:
        logger.warning(
            "dropped %d line(s) of the run journal segment %s not authenticated by this runner's key"
            " (forged, altered, or written before journal lines were signed): not replayed",
            dropped,
            path,
        )
    if unreadable:
        logger.warning("skipped %d unreadable line(s) of the run journal segment %s", unreadable, path)
    return found
