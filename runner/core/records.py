"""What a run leaves behind: a row saying what ran and how it ended, without secrets.

Parameters are always stored as a hash and a size; their values, the output and stderr only in
the record's payload (payloads.py), when the runner keeps payloads. Everything a run reports or
stores (output, error, detail, progress, its run record and audit reason) is scrubbed of
every secret the tool's config refers to (its ${VAR}s' values), as CI systems mask
secrets: each occurrence becomes MASK, also in the forms a URL or a JSON string gives it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

import orjson

from ..errors import KiwiError
from .flat import flat

MAX_ERROR_CHARS = 2000
MAX_WARNINGS, MAX_WARNING_CHARS = 16, 1000  # tool_runs.warnings (210_run_records.sql)
MASK = "***"  # what a secret value reads as once scrubbed (GitHub Actions' mask, familiar from CI logs)
# Values shorter than this are left as they are: "1", "on" or "dev" would mask ordinary words
# and digits all over an output, and masking them would be an oracle (a tool echoing a guess
# of two or three characters would show by the mask whether the guess is the value). Such
# short values are settings, not credentials.
_MIN_SECRET_LEN = 4
# One encoder for every digest: json.dumps with options builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def params_digest(params: Any) -> tuple[str, int]:
    """sha256 and size of the parameters' canonical JSON; whatever a caller sent (even what JSON
    cannot hold, which the schema check then refuses) still gets a digest, never an exception."""
    try:
        text = _orjson_canonical(params) if _ascii_flat(params) else _CANONICAL.encode(params)
    except (TypeError, ValueError):
        text = repr(params)
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest(), len(data)


def _orjson_canonical(params: dict[str, Any]) -> str:
    """_CANONICAL's text of an _ascii_flat object, by orjson: byte for byte the same there (keys
    in the same order, the same escapes, no floats), in a fraction of the time."""
    return orjson.dumps(params, option=orjson.OPT_SORT_KEYS).decode()


def _ascii_flat(params: Any) -> bool:
    """Whether params is an object of ASCII keys and ASCII text, 64-bit integers, booleans and
    nulls: the parameters of most calls, which orjson writes as _CANONICAL does."""
    found = flat(params)
    return found is not None and found.ascii and not found.floats and not found.wide


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def params_snapshot(params: Any) -> dict[str, Any] | None:
    """The parameters as they are now, for a record made later: a shallow copy is a whole one
    when every value is a scalar. None when they nest: take their digest now instead."""
    if isinstance(params, dict) and all(type(v) in _SCALAR_TYPES for v in params.values()):
        return dict(params)
    return None


def secret_values(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the named variables (a config's ${VAR}s: variables_in) and the forms they
    take in a URL or inside a JSON string, longest first (so a form holding another goes first)."""
    forms: set[str] = set()
    for name in names:
        value = environ.get(name)
        if value and len(value) >= _MIN_SECRET_LEN:
            forms |= {value, quote(value, safe=""), quote_plus(value, safe="")}
            forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str | None, secrets: Iterable[str]) -> str | None:
    """text with every secret value masked."""
    if text is None:
        return None
    for s in secrets:
        text = text.replace(s, MASK)
    return text


def scrub_deep(value: Any, secrets: list[str]) -> Any:
    """scrub over every string inside dicts and lists, keys included (a tool's structured output
    may print a secret as a key; detail: stderr, bodies, headers). A string shorter than every
    secret cannot hold one, and is not searched."""
    if not secrets:
        return value
    return _scrubbed(value, secrets, min(map(len, secrets)))


def _scrubbed(value: Any, secrets: list[str], shortest: int) -> Any:
    if isinstance(value, str):
        return value if len(value) < shortest else scrub(value, secrets)
    if isinstance(value, list):
        return [_scrubbed(v, secrets, shortest) for v in value]
    if isinstance(value, dict):
        return {
            (scrub(k, secrets) if isinstance(k, str) and len(k) >= shortest else k): _scrubbed(v, secrets, shortest)
            for k, v in value.items()
        }
    return value


def scrub_error(error: KiwiError, secrets: list[str]) -> KiwiError:
    """The error with its message and hint scrubbed in place, before anyone reports, audits or
    stores it (a caller may read `failure` itself: the MCP server does)."""
    if secrets:
        error.message = scrub(error.message, secrets) or ""
        error.hint = scrub(error.hint, secrets)
        error.args = (error.message, *error.args[1:])
    return error


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
    source: str = "registry",
    warnings: list[str] | None = None,
    sandbox: dict[str, Any] | None = None,
    digest: tuple[str, int] | None = None,
    params: Any = None,
    started_at: str | None = None,
    trace_id: str | None = None,
    payload: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The record record_run takes. digest: params_digest() of the parameters as they were
    run, else params: the parameters themselves (a params_snapshot); started_at: ISO 8601;
    source: registry, or the local space (project, user) whose tool.yaml ran, which is
    stored only then (the column's default is registry); sandbox: the sandbox profile the run
    had (a JSON object of at most 4096 bytes as text, tool_runs.sandbox), stored when given;
    trace_id: the run's OpenTelemetry trace (telemetry.trace_id() while its span was current),
    stored when given; payload: makes what the record keeps of the run's parameters, output and
    stderr (payloads.run_payload), called here, behind the run."""
    params_sha256, params_size = digest if digest is not None else params_digest(params)
    record: dict[str, Any] = {
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
    if source != "registry":
        record["source"] = source
    if warnings:  # what the run warned of (a deprecated or yanked version ...), as the column bounds them
        record["warnings"] = [
            w if len(w) <= MAX_WARNING_CHARS else w[: MAX_WARNING_CHARS - 1] + "…" for w in warnings[:MAX_WARNINGS]
        ]
    if sandbox is not None:
        record["sandbox"] = sandbox
    if trace_id is not None:
        record["trace_id"] = trace_id
    if payload is not None:
        record["payload"] = payload()
    if started_at is not None:
        record["started_at"] = started_at
    return record
