"""content_hash, recomputed outside the database (the algorithm is documented in
supabase/migrations/*_content_hash.sql). The runner recomputes it to prove that what it
runs is what was signed, without trusting the database's own hashing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

PREFIX = "kiwi-content-v1\n"


def canonical_json(value: Any) -> str:
    """Keys by code point, no whitespace, plain decimals (1.50 -> 1.5, 1e3 -> 1000), JSON
    string escapes as PostgreSQL writes them."""
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{canonical_json(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        return "0" if value == 0 else format(value.normalize(), "f")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"not a JSON value: {value!r}")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(manifest: Any, files: Iterable[tuple[str, str]]) -> str:
    """files: (path, sha256) pairs, in any order."""
    body = PREFIX + canonical_json(manifest) + "\n"
    body += "".join(f"{path}\t{sha}\n" for path, sha in sorted(files))
    return sha256_hex(body)
