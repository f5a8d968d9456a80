"""A plan's own content is checked against its content_hash before any of it is used.

The content_hash (supabase/migrations/*_content_hash.sql) covers the manifest and every
file's sha256; each file's sha256 covers its bytes. Someone who alters a stored version in
the database (bypassing every trigger) can change a file's text, sha256 and size
together, but not its content_hash without changing the version the runner asked for, a
lockfile's pin and every signature. So the runner recomputes the hash itself, under
every trust policy, and refuses a plan that does not match it, blaming the registry
(not a cached copy on disk, whose own check comes later: materialize.py).

The verdict is remembered by the plan's identity: a plan cache hands back the same
dict, hence the same Plan, on every run while the plan is current (identity.py).
"""

from __future__ import annotations

import hashlib

from ..core.identity import ByIdentity
from ..core.plan import Plan
from ..errors import IntegrityError
from .content_hash import content_hash


def _problem(plan: Plan) -> str | None:
    """Why the plan's manifest and files do not hash to its content_hash, or None."""
    pairs = []
    for f in plan.files:
        if f.content_text is not None:
            digest = hashlib.sha256(f.content_text.encode("utf-8")).hexdigest()
            if digest != f.sha256:
                return f"file {f.path} does not match its sha256 (recorded {f.sha256[:16]}, content {digest[:16]})"
        pairs.append((f.path, f.sha256))
    recomputed = content_hash(plan.manifest, pairs)
    if recomputed != plan.content_hash:
        return f"its manifest and files hash to {recomputed[:16]}, not its content_hash {plan.content_hash[:16]}"
    return None


_problems: ByIdentity[str | None] = ByIdentity(_problem)


def check_content(plan: Plan) -> None:
    """Refuse (IntegrityError, exit 4) a plan whose content does not hash to its content_hash."""
    problem = _problems(plan)
    if problem is None:
        return
    if plan.source == "registry":
        what = f"the registry content of {plan.tool_id}@{plan.version}"
        hint = (
            "the stored version was altered in the database after it was published; nothing ran and no "
            "cached copy was used. Ask the registry's admins to restore it (`kiwi verify TOOL` shows each element)"
        )
    else:
        what = f"the registry's preview of the {plan.source} space's {plan.tool_id}"
        hint = "the registry answered with content other than the tool.yaml and files sent; nothing ran"
    raise IntegrityError(f"{what} does not match its content_hash: {problem}", hint=hint)
