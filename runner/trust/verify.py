"""Verify a chain before it runs: every element is what its publisher signed.

The runner does not take the database's word for it. From the stored rows
(public.resolve_chain_attestations) it recomputes each element's content_hash from its
manifest and files, checks a signature by a key config.toml trusts for the element's
namespace, and checks that the plan it is about to run (files, manifest, merged config)
is made of exactly those elements. An element is one of:

  trusted        signed by a trusted key, and its content hashes to what was signed
  unsigned       no signature at all
  untrusted      signed, but by no key trusted for its namespace
  bad_signature  a trusted key's signature that does not verify
  altered        its stored content no longer hashes to its content_hash, or the plan
                 is not made of the stored elements
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import TrustSettings
from ..core.plan import Plan
from ..errors import IntegrityError, Refused
from .content_hash import content_hash
from .keys import fingerprint, parse_public_key
from .signing import verifies

TRUSTED = "trusted"
_MISSING = object()


@dataclass(frozen=True)
class Verdict:
    tool_id: str
    version: str
    state: str  # trusted | unsigned | untrusted | bad_signature | altered
    detail: str
    key_fingerprint: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == TRUSTED

    def describe(self) -> str:
        return f"{self.tool_id}@{self.version} is {self.state.replace('_', ' ')} ({self.detail})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool_id": self.tool_id,
            "version": self.version,
            "state": self.state,
            "detail": self.detail,
            "key_fingerprint": self.key_fingerprint,
        }


def signature_state(
    namespace: str, content_hash_: str, signatures: Iterable[dict[str, Any]], trust: TrustSettings
) -> tuple[str, str, str | None]:
    """(state, detail, fingerprint) of one version's signatures under the trusted keys."""
    signatures = list(signatures)
    if not signatures:
        return "unsigned", "no signature", None
    trusted = {fingerprint(k): k for k in (parse_public_key(t) for t in trust.keys_for(namespace))}
    bad: str | None = None
    for sig in signatures:
        key = trusted.get(sig.get("key_fingerprint", ""))
        if key is None:
            continue
        if verifies(key, content_hash_, sig.get("signature", "")):
            return TRUSTED, f"signed by trusted key {sig['key_fingerprint'][:16]}", sig["key_fingerprint"]
        bad = sig["key_fingerprint"]
    if bad is not None:
        return "bad_signature", f"the signature of trusted key {bad[:16]} does not verify", bad
    fps = ", ".join(s.get("key_fingerprint", "?")[:16] for s in signatures)
    return "untrusted", f"signed only by keys not trusted for namespace {namespace!r} ({fps})", None


def merged_config(manifests: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The plan's config rebuilt from the chain's manifests (tool first, as stored), with
    the registry's rule (kiwi_internal.jsonb_deep_merge_all): the child wins, objects merge
    recursively, arrays and scalars are replaced, a manifest without config changes nothing;
    but a list an element's config_schema marks `x-merge: append` is appended to by the
    elements above it (a value that is no list adds nothing, and an object holding such a
    list is not replaced by a value that is no object)."""
    out: Any = None
    marks: Any = None
    for manifest in reversed(manifests):  # primitive first
        patch = manifest.get("config", _MISSING)
        if patch is not _MISSING:
            out = _merge(out, patch, marks)
        marks = _append_marks(manifest.get("config_schema"), marks)
    return out if out is not None else {}


def _merge(base: Any, patch: Any, marks: Any = None) -> Any:
    if marks == "append":
        return patch if not isinstance(base, list) else base + patch if isinstance(patch, list) else base
    if isinstance(marks, dict) and isinstance(base, dict) and not isinstance(patch, dict):
        return base
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    merged = {**base, **patch}
    for key, value in patch.items():
        mark = marks.get(key) if isinstance(marks, dict) else None
        if mark is not None or (isinstance(value, dict) and isinstance(base.get(key), dict)):
            merged[key] = _merge(base.get(key), value, mark) if key in base else value
    return merged


def _append_marks(schema: Any, marks: Any) -> Any:
    """kiwi_internal.append_marks: the marks of `schema` added to `marks`, never taken away."""
    if marks == "append" or not isinstance(schema, dict):
        return marks
    if schema.get("x-merge") == "append":
        return "append"
    out = marks
    properties = schema.get("properties")
    for key, sub in (properties if isinstance(properties, dict) else {}).items():
        mark = _append_marks(sub, marks.get(key) if isinstance(marks, dict) else None)
        if mark is not None:
            out = {**(out or {}), key: mark}
    return out


def judge(plan: Plan, attestations: Sequence[dict[str, Any]], trust: TrustSettings) -> list[Verdict]:
    """One verdict per element of the plan's chain. A local space's tool is held to the same
    policy: with the stored chain of a published version of the same content_hash
    (Runner._local_attestations) it is judged as that version; otherwise `attestations` are
    its executors' and the tool itself is unsigned (nobody signed that content)."""
    own = plan.source == "registry" or (
        bool(attestations)
        and attestations[0]["tool_id"] == plan.tool_id
        and attestations[0]["content_hash"] == plan.content_hash
    )
    links = plan.chain if own else plan.chain[1:]
    stored = [(r["tool_id"], r["version"], r["content_hash"]) for r in attestations]
    planned = [(link.tool_id, link.version, link.content_hash) for link in links]
    if [s[0] for s in stored] != [p[0] for p in planned]:
        why = f"the plan's chain {_chain_text(planned)} is not the stored chain {_chain_text(stored)}"
        return [Verdict(r["tool_id"], r["version"], "altered", why) for r in attestations]
    verdicts = [_judge_element(plan, i, row, planned[i], trust) for i, row in enumerate(attestations)]
    manifests = [r["manifest"] for r in attestations]
    if not own:
        manifests = [plan.manifest, *manifests]
    if verdicts and all(v.state != "altered" for v in verdicts) and merged_config(manifests) != plan.config:
        first = verdicts[0]
        why = "the plan's merged config differs from the configs of its stored chain"
        verdicts[0] = Verdict(first.tool_id, first.version, "altered", why)
    if not own:
        why = f"the {plan.source} space's copy ({plan.content_hash[:16]}) is no published version, so nobody signed it"
        verdicts.insert(0, Verdict(plan.tool_id, plan.version, "unsigned", why))
    return verdicts


def stored_content_altered(row: dict[str, Any]) -> str | None:
    """Why a stored version (an attestation row) no longer hashes to its content_hash, or None."""
    recomputed = content_hash(row["manifest"], [(f["path"], f["sha256"]) for f in row.get("files") or []])
    if recomputed == row["content_hash"]:
        return None
    return f"its stored content hashes to {recomputed[:16]}, not its content_hash {row['content_hash'][:16]}"


def _judge_element(
    plan: Plan, index: int, row: dict[str, Any], planned: tuple[str, str, str], trust: TrustSettings
) -> Verdict:
    tool_id, version = row["tool_id"], row["version"]
    files = [(f["path"], f["sha256"]) for f in row.get("files") or []]
    why = stored_content_altered(row)
    if why is not None:
        return Verdict(tool_id, version, "altered", why)
    if planned[1:] != (version, row["content_hash"]):
        stored = f"{version} ({row['content_hash'][:16]})"
        why = f"the plan runs {planned[1]} ({planned[2][:16]}), the registry stores {stored}"
        return Verdict(tool_id, version, "altered", why)
    if index == 0 and plan.source == "registry":
        if plan.manifest and plan.manifest != row["manifest"]:
            return Verdict(tool_id, version, "altered", "the plan's manifest differs from the stored manifest")
        if sorted((f.path, f.sha256) for f in plan.files) != sorted(files):
            return Verdict(tool_id, version, "altered", "the plan's files differ from the stored files")
    namespace = row.get("namespace") or "public"
    state, detail, fp = signature_state(namespace, row["content_hash"], row.get("signatures") or [], trust)
    return Verdict(tool_id, version, state, detail, fp)


def _chain_text(chain: Sequence[tuple[str, str, str]]) -> str:
    return " -> ".join(f"{t}@{v}" for t, v, _ in chain)


def plan_key(plan: Plan) -> str:
    """What a verification covers: the chain, the files and the merged config (a memo key)."""
    body = json.dumps(
        [
            plan.source,
            [(c.tool_id, c.content_hash) for c in plan.chain],
            [(f.path, f.sha256) for f in plan.files],
            plan.config,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def refusal(plan: Plan, verdicts: Sequence[Verdict]) -> Refused:
    failing = [v for v in verdicts if not v.ok]
    lines = "; ".join(v.describe() for v in failing)
    cls = IntegrityError if any(v.state in ("altered", "bad_signature") for v in failing) else Refused
    hint = "sign with `kiwi sign TOOL@VERSION`, or trust the signer's key under [trust.keys] in config.toml"
    if plan.source != "registry":
        hint = f"publish and sign it, or run the registry's with `kiwi run --registry {plan.tool_id}`; " + hint
    where = f" (the {plan.source} space's, {plan.origin})" if plan.source != "registry" else ""
    return cls(f"trust policy refuses {plan.tool_id}@{plan.version}{where}: {lines}", hint=hint)
