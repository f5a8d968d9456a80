"""One audit row for every execute action other than run/dry_run (those the Runner's gate
audits): what was asked, by which session, and how it went, so refusals are on record too."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from mcp_types import CallToolResult

from ...core.records import params_digest
from ...core.refs import ToolRef
from ...errors import KiwiError, RegistryUnavailable
from ...registry.base import Registry

__all__ = ["audited_action", "audited_call", "manifest_tool_id"]

logger = logging.getLogger("kiwi.mcp.server")


Keep = Callable[[dict[str, Any]], None]
"""Takes an audit row the registry could not be reached for (the run recorder's submit_audit:
journaled, and written once the registry answers again)."""


async def _audit(reg: Registry, entry: dict[str, Any], keep: Keep | None = None) -> None:
    """Write the audit row; a failure to write it is logged, never a failed call. A row the
    registry could not be reached for goes to `keep`, when there is one, under the id and time
    it was first written with (a write whose answer was lost may have stored it: not twice)."""
    row = {k: v for k, v in entry.items() if v is not None}
    if keep is not None:
        row = {"id": str(uuid.uuid4()), "at": datetime.now(UTC).isoformat(), **row}
    try:
        await reg.record_audit(row)
    except RegistryUnavailable as e:
        if keep is None:
            logger.warning("could not audit the call of %s: %s", entry.get("tool_id"), e.message)
        else:
            keep(row)
    except KiwiError as e:
        logger.warning("could not audit the call of %s: %s", entry.get("tool_id"), e.message)


_REFUSALS = frozenset(
    {"usage", "invalid_parameters", "not_found", "refused", "integrity", "permission_denied", "approval_pending"}
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


async def audited_action(
    reg: Registry,
    *,
    session: str,
    action: str,
    subject: str | None,
    inputs: dict[str, Any],
    work: Callable[[], Awaitable[CallToolResult]],
    keep: Keep | None = None,
) -> CallToolResult:
    """`work` (an execute action other than run/dry_run), with one audit row for how it went.

    Refused (a usage error, not found, refused by the registry, no permission): decision
    refused with the reason. Failed after it started (an import that timed out or published
    only some tools, an unexpected error): allowed, outcome error. Otherwise allowed, outcome
    success, naming what it touched (the published version and its content_hash, the
    approval's tool, the context's directive). A delete without confirm is a preview: allowed,
    no outcome, reason "preview". The inputs are stored only as their sha256 and size; the
    result is returned (or the error raised) unchanged, and a failure to audit is only logged;
    a row the registry could not be reached for goes to `keep` (the runner's recorder), which
    journals it and writes it once the registry answers again."""
    started = time.perf_counter()
    entry: dict[str, Any] = {"session_id": session, "action": action}
    entry["params_sha256"], entry["params_size"] = params_digest(inputs)
    fallback = subject or f"{action}:unknown"
    try:
        result = await work()
    except KiwiError as e:
        refused = e.kind in _REFUSALS
        verdict = _verdict(refused, e.message)
        await _audit(reg, {**entry, **_subject(fallback), **verdict, "duration_ms": _ms(started)}, keep)
        raise
    except Exception as e:
        reason = f"failed unexpectedly: {type(e).__name__}"
        await _audit(reg, {**entry, **_subject(fallback), **_verdict(False, reason), "duration_ms": _ms(started)}, keep)
        raise
    data = result.structured_content if isinstance(result.structured_content, dict) else {}
    if result.is_error:
        said = data.get("error")
        error: dict[str, Any] = said if isinstance(said, dict) else {}
        refused = action != "import" and error.get("kind") in _REFUSALS
        verdict = _verdict(refused, str(error.get("message") or "failed"))
    elif action == "delete" and not data.get("deleted"):
        verdict = {"decision": "allowed", "reason": "preview: nothing deleted (confirm=true was not given)"}
    else:
        verdict = {"decision": "allowed", "outcome": "success"}
    await _audit(reg, {**entry, **_subject(fallback, data), **verdict, "duration_ms": _ms(started)}, keep)
    return result


async def audited_call(
    reg: Registry,
    *,
    session: str,
    action: str,
    subject: str,
    inputs: dict[str, Any],
    work: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """`work` (the registry's answer, or a KiwiError), with the audit row `audited_action` would
    write for the same action: what the CLI's publish, yank, deprecate, delete, approve and deny
    leave, so the audit log does not depend on the entry point."""
    started = time.perf_counter()
    entry: dict[str, Any] = {"session_id": session, "action": action}
    entry["params_sha256"], entry["params_size"] = params_digest(inputs)
    try:
        answer = await work()
    except KiwiError as e:
        verdict = _verdict(e.kind in _REFUSALS, e.message)
        await _audit(reg, {**entry, **_subject(subject), **verdict, "duration_ms": _ms(started)})
        raise
    except Exception as e:
        verdict = _verdict(False, f"failed unexpectedly: {type(e).__name__}")
        await _audit(reg, {**entry, **_subject(subject), **verdict, "duration_ms": _ms(started)})
        raise
    verdict = {"decision": "allowed", "outcome": "success"}
    await _audit(reg, {**entry, **_subject(subject, answer), **verdict, "duration_ms": _ms(started)})
    return answer


def _verdict(refused: bool, reason: str) -> dict[str, Any]:
    if refused:
        return {"decision": "refused", "reason": reason[:2000]}
    return {"decision": "allowed", "outcome": "error", "reason": reason[:2000]}


def _subject(fallback: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """tool_id, version and content_hash of what an action touched, from its result when it has them."""
    data = data or {}
    found: dict[str, Any] = {}
    for key in ("approval", "would_delete", "context"):
        if isinstance(data.get(key), dict):
            found = data[key]
    tool = found.get("tool_id") or found.get("item_id") or found.get("directive") or data.get("tool_id")
    tool = tool or data.get("server") or (f"context:{found['id']}" if found.get("id") and "context" in data else None)
    tool = tool or fallback
    version = found.get("version") or found.get("latest_version") or data.get("version")
    if version is None and "@" in str(tool):  # a directive as ref@version
        named = ToolRef.parse(str(tool), strict=False)
        tool, version = named.ref, named.version
    content_hash = found.get("content_hash") or data.get("content_hash")
    tool = "".join(ch for ch in str(tool) if ch.isprintable())[:300] or fallback[:300]
    return {
        "tool_id": tool,
        "version": str(version)[:128] if version is not None else None,
        "content_hash": content_hash if isinstance(content_hash, str) and _SHA256.fullmatch(content_hash) else None,
    }


def manifest_tool_id(manifest: dict[str, Any] | str | None) -> str | None:
    """The manifest's tool_id, when it is easy to see (for auditing a publish that fails early)."""
    if isinstance(manifest, dict) and manifest.get("tool_id"):
        tool_id, namespace = str(manifest["tool_id"]), manifest.get("namespace")
        in_namespace = namespace and namespace != "public" and "/" not in tool_id
        return f"{namespace}/{tool_id}" if in_namespace else tool_id
    if isinstance(manifest, str):
        found = re.search(r"^tool_id:\s*['\"]?([^\s'\"#]+)", manifest, re.MULTILINE)
        return found.group(1) if found else None
    return None


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
