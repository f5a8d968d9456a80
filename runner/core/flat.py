"""One pass over the parameters most calls send: an object of text, numbers, booleans and nulls.

Three steps of every run take a shortcut for such an object (params.py: no shape walk;
records.py: its digest by orjson; payloads.py: kept in the record unwalked), each on its own
conditions. What those conditions read is found here, in one loop, so the three cannot drift.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .text import is_utf8

INT64 = 2**63  # integers in [-INT64, INT64) are those orjson writes


class Flat(NamedTuple):
    """What an object of scalars holds."""

    key_chars: int  # characters of its keys
    text_chars: int  # characters of its text values
    texts: int  # how many values are text
    others: int  # how many are numbers, booleans and nulls
    ascii: bool  # every key and text value is ASCII
    nul: bool  # some key or text value holds NUL
    unencodable: bool  # some key or text value holds a lone surrogate (not UTF-8)
    floats: bool  # some value is a float
    nonfinite: bool  # some float is NaN or an infinity
    wide: bool  # some integer is beyond 64 bits


def flat(value: Any) -> Flat | None:
    """`value`'s facts when it is a dict of text keys to text, numbers, booleans and nulls; None
    for anything else (another type, a key that is not text, a value that nests)."""
    if type(value) is not dict:
        return None
    key_chars = text_chars = texts = others = 0
    ascii, nul, unencodable, floats, nonfinite, wide = True, False, False, False, False, False
    for key, item in value.items():
        if type(key) is not str:
            return None
        key_chars += len(key)
        if not key.isascii():
            ascii = False
            unencodable = unencodable or not is_utf8(key)
        nul = nul or "\x00" in key
        kind = type(item)
        if kind is str:
            texts += 1
            text_chars += len(item)
            if not item.isascii():
                ascii = False
                unencodable = unencodable or not is_utf8(item)
            nul = nul or "\x00" in item
            continue
        if kind is float:
            floats = True
            nonfinite = nonfinite or not math.isfinite(item)
        elif kind is int:
            wide = wide or not -INT64 <= item < INT64
        elif kind is not bool and item is not None:
            return None
        others += 1
    return Flat(key_chars, text_chars, texts, others, ascii, nul, unencodable, floats, nonfinite, wide)
