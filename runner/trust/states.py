"""What search and load show of a tool's signatures, judged by this runner's trusted
keys: trusted, untrusted (signed, but by no key trusted for its namespace), unsigned, or
bad_signature (a trusted key's signature that does not verify)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import TrustSettings
from ..registry.base import Registry
from .verify import Verdict, signature_state

UNSIGNED: dict[str, Any] = {"state": "unsigned", "detail": "no signature", "key_fingerprints": []}


def _state(
    namespace: str, content_hash: str, signatures: Sequence[dict[str, Any]], trust: TrustSettings
) -> dict[str, Any]:
    state, detail, _ = signature_state(namespace, content_hash, signatures, trust)
    return {"state": state, "detail": detail, "key_fingerprints": [s.get("key_fingerprint") for s in signatures]}


async def signature_labels(
    registry: Registry, rows: Sequence[dict[str, Any]], trust: TrustSettings
) -> dict[str, dict[str, Any]]:
    """tool_id -> {state, detail, key_fingerprints} for every search result (its latest
    version; UNSIGNED when it has none): from the rows themselves when search_tools gave
    their content_hash and signatures (one query), else in one call to public.signature_states."""
    if not rows:
        return {}
    namespaces = {r["tool_id"]: r.get("namespace") or "public" for r in rows}
    if all("signatures" in r for r in rows):
        states: list[dict[str, Any]] = [r for r in rows if r.get("content_hash")]
    else:
        states = await registry.signature_states(list(namespaces))
    labels = {
        s["tool_id"]: _state(namespaces.get(s["tool_id"], "public"), s["content_hash"], s["signatures"] or [], trust)
        for s in states
    }
    return {tool_id: labels.get(tool_id, UNSIGNED) for tool_id in namespaces}


def verdict_label(verdict: Verdict) -> dict[str, Any]:
    """A chain element's verdict as load shows it."""
    return {"state": verdict.state, "detail": verdict.detail, "key_fingerprint": verdict.key_fingerprint}
