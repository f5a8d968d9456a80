"""What a run leaves behind: a row saying what ran and how it ended, without secrets.

Parameters are stored as a hash and a size, never as values. Error text is scrubbed of
every secret the tool's config refers to (${VAR} values) before it is stored or shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .expand import map_strings

MAX_ERROR_CHARS = 2000
_MIN_SECRET_LEN = 4  # shorter values ("1", "on") would scrub ordinary words
# One encoder for every digest: json.dumps with options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def params_digest(params: Any) -> tuple[str, int]:
    """sha256 and size of the parameters' canonical JSON; whatever a caller sent (even what JSON
    cannot hold, which the schema check then refuses) still gets a digest, never an exception."""
    try:
        text = _CANONICAL.encode(params)
    except (TypeError, ValueError):
        text = repr(params)
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest(), len(data)


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def params_snapshot(params: Any) -> dict[str, Any] | None:
    """The parameters as they are now, for a record made later: a shallow copy is a whole one
    when every value is a scalar. None when they nest: take their digest now instead."""
    if isinstance(params, dict) and all(type(v) in _SCALAR_TYPES for v in params.values()):
        return dict(params)
    return None


def secret_values(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the named variables (a config's ${VAR}s: variables_in), longest first."""
    values = {environ[name] for name in names if environ.get(name)}
    return sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)


def scrub(text: str | None, secrets: Iterable[str]) -> str | None:
    if text is None:
        return None
    for s in secrets:
        text = text.replace(s, "***")
    return text


def scrub_deep(value: Any, secrets: list[str]) -> Any:
    """scrub over every string inside dicts and lists (a primitive's detail: stderr, bodies, headers)."""
    return map_strings(value, lambda text: scrub(text, secrets)) if secrets else value


def run_record(
    *,
    tool_id: str,
    version: str | None,
    content_hash: str | None,
    status: str,
    exit_code: int | None,
    duration_ms: float,
    error: str | None,
    chain: list[str],
    primitive: str | None,
    digest: tuple[str, int] | None = None,
    params: Any = None,
    started_at: float | None = None,
) -> dict[str, Any]:
    """The record record_run takes. digest: params_digest() of the parameters as they were
    run, else params: the parameters themselves (a params_snapshot); started_at: a Unix time."""
    params_sha256, params_size = digest if digest is not None else params_digest(params)
    record = {
        "tool_id": tool_id,
        "version": version,
        "content_hash": content_hash,
        "status": status,
        "exit_code": exit_code,
        "duration_ms": round(duration_ms, 3),
        "error_summary": error[:MAX_ERROR_CHARS] if error else None,
        "executor_chain": chain,
        "primitive": primitive,
        "params_sha256": params_sha256,
        "params_size": params_size,
    }
    if started_at is not None:
        record["started_at"] = datetime.fromtimestamp(started_at, UTC).isoformat()
    return record
