"""What a run's record keeps of what it was given and gave back (tool_runs.payload).

A person reading a run wants its parameters, output and stderr; the record keeps them, masked
of every secret the tool's config refers to and capped so a record stays small: each part
has a budget, a part over it is cut (stderr keeps its end, where the error is; the others
their start) and named in `truncated`. What PostgreSQL's jsonb cannot hold (NUL, lone
surrogates) is replaced, so no output a tool prints can make the record refused.
The runner keeps payloads unless KIWI_RUN_PAYLOADS=off ([runs] payloads = false).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .flat import flat
from .records import scrub_deep
from .text import is_utf8

MAX_PAYLOAD_BYTES = 65536  # tool_runs_payload_object (210_run_records.sql)
# Each part's budget in bytes of JSON text; together well under MAX_PAYLOAD_BYTES.
BUDGETS = {"params": 16384, "output": 32768, "stderr": 12288}
CUT = "…"
_REPLACEMENT = "\ufffd"


def run_payload(
    params: Any, output: Any, stderr: str | None, secrets: list[str], *, masked: tuple[str, ...] = ()
) -> dict[str, Any]:
    """{params, output, stderr, truncated}: each part masked (unless named in `masked`: a run's
    result is masked already), made jsonb-safe and fitted to its budget."""
    kept: dict[str, Any] = {}
    truncated: list[str] = []
    for name, value in (("params", params), ("output", output), ("stderr", stderr)):
        if value is None:
            continue
        value = value if name in masked else scrub_deep(value, secrets)
        if _plain(value, BUDGETS[name]):  # most parameters: nothing to clean, nothing to cut
            kept[name] = value
            continue
        fitted, was_cut = _fit(_jsonb_safe(value), BUDGETS[name], tail=name == "stderr")
        kept[name] = fitted
        if was_cut:
            truncated.append(name)
    kept["truncated"] = truncated
    return kept


# One encoder for every measure: json.dumps with options builds a new one per call.
_TEXT = json.JSONEncoder(ensure_ascii=False)
_MOST_BYTES_A_CHAR = 6  # of JSON text, a character escaped as \uXXXX (UTF-8 takes at most 4)


_LONGEST_NUMBER = 24  # characters of a finite float's or a 64-bit integer's JSON text, at most


def _plain(value: Any, budget: int) -> bool:
    """Whether `value` is an object of ASCII text without NUL, finite numbers, booleans and
    nulls whose JSON text surely fits `budget` (each character counted as the six of an escape):
    _jsonb_safe would change nothing and _fit would keep it, so neither walks it."""
    found = flat(value)
    if found is None or not found.ascii or found.nul or found.nonfinite or found.wide:
        return False
    texts = _MOST_BYTES_A_CHAR * found.text_chars + 2 * found.texts
    keys = _MOST_BYTES_A_CHAR * found.key_chars + 4 * (found.texts + found.others)
    return 2 + texts + _LONGEST_NUMBER * found.others + keys <= budget


def _size(value: Any) -> int:
    return len(_TEXT.encode(value).encode("utf-8"))


def _fits(value: Any, budget: int) -> bool:
    """Whether the value's JSON text fits the budget; a short string is known to without writing it."""
    if isinstance(value, str) and len(value) * _MOST_BYTES_A_CHAR + 2 <= budget:
        return True
    return _size(value) <= budget


def _fit(value: Any, budget: int, *, tail: bool) -> tuple[Any, bool]:
    """The value when its JSON text fits the budget, else its text (a string's own, another
    value's JSON) cut to fit, with CUT where the cut is."""
    try:
        if _fits(value, budget):
            return value, False
        text = value if isinstance(value, str) else _TEXT.encode(value)
    except (TypeError, ValueError):  # not JSON (a tool's output is; a caller's parameters may not be)
        text = repr(value)
    keep = min(len(text), budget)
    while True:
        piece = CUT + text[len(text) - keep :] if tail else text[:keep] + CUT
        if _size(piece) <= budget or keep == 0:
            return piece, True
        keep = keep * budget // _size(piece) - 1 if keep > 64 else keep // 2


def _jsonb_safe(value: Any) -> Any:
    """Strings (and keys) without NUL or lone surrogates, which jsonb refuses (each becomes U+FFFD),
    and numbers JSON can write (Python's json reads NaN and Infinity; jsonb does not)."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_jsonb_safe(v) for v in value]
    if isinstance(value, dict):
        return {(_clean(k) if isinstance(k, str) else k): _jsonb_safe(v) for k, v in value.items()}
    return value


def _clean(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", _REPLACEMENT)
    if text.isascii():
        return text
    return text if is_utf8(text) else text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
