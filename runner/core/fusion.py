"""How search fuses its two rankings, for the searches made in process (local spaces, the
in-memory registry): the weights of kiwi_internal.search_weights() (170_search.sql), which
defines them for search_tools, and the same scaling. tests/search/test_fusion.py holds the
two equal.

It also holds the lexical rank's weights, which the local spaces' ranking uses.

Each list's scores are scaled between its best (1) and FLOOR x its worst (0), a tool missing
from a list scoring 0 there; the rank is WORDS x words + MEANING x meaning.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

WORDS, MEANING, QUALITY = 0.4, 0.6, 0.1
WORDS_FLOOR, MEANING_FLOOR = 0.5, 0.0  # search_weights' lexical_floor, meaning_floor
# The lexical rank's: per word a tool has (words only; fused with meaning), the terms'
# field share (0..1) times TERMS, and the fields (id and name, tags, description and
# category, parameters): search_weights' per_word, per_word_fused, terms, *_field.
PER_WORD, PER_WORD_FUSED, TERMS = 0.75, 3.0, 3.0
FIELDS = (1.0, 0.7, 0.7, 0.3)
# A long request's words weigh less in a long document (BM25's length factor, its b growing
# from 0 at LENGTH_FROM terms to LENGTH_B at LENGTH_FULL) and more the more often the document
# says them (BM25's term frequency), and a repeated word more (BM25's query frequency):
# search_weights' length_b, length_k1, length_pivot, length_from, length_full, query_k3.
LENGTH_B, LENGTH_K1, LENGTH_PIVOT, LENGTH_FROM, LENGTH_FULL, QUERY_K3 = 0.85, 1.5, 32.0, 4.0, 8.0, 8.0

K = TypeVar("K", bound=Hashable)


def length_b(terms: int) -> float:
    """BM25's b for a request of `terms` terms: 0 for a short one, LENGTH_B from LENGTH_FULL."""
    return LENGTH_B * min(max((terms - LENGTH_FROM) / (LENGTH_FULL - LENGTH_FROM), 0.0), 1.0)


def length_factor(words: int, terms: int) -> float:
    """BM25's document length factor for a document of `words` distinct words and a request of
    `terms` terms: 1 for a short request (b 0), below 1 for a document longer than LENGTH_PIVOT."""
    b = length_b(terms)
    return (LENGTH_K1 + 1) / (1 + LENGTH_K1 * (1 - b + b * words / LENGTH_PIVOT))


def tf_factor(tf: int, words: int, terms: int) -> float:
    """BM25's term frequency for a term the document says `tf` times, as a factor of
    length_factor (together tf (k1 + 1) / (tf + k1 norm)): 1 for a term said once, and for
    every term of a short request (kiwi_internal.search_tf_weighted in SQL)."""
    b = length_b(terms)
    if b == 0 or tf <= 1:
        return 1.0
    norm = 1 - b + b * words / LENGTH_PIVOT
    return tf * (LENGTH_K1 * norm + 1) / (tf + LENGTH_K1 * norm)


def query_weight(times: int) -> float:
    """BM25's query frequency factor of a term the request says `times` times (1 for once)."""
    return times * (QUERY_K3 + 1) / (QUERY_K3 + times)


def scaled(scores: Mapping[K, float], floor: float) -> dict[K, float]:
    """Each score between floor x the lowest (0) and the highest (1); all 0 when they are equal
    to that floor (as search_tools' nullif)."""
    if not scores:
        return {}
    high, low = max(scores.values()), min(scores.values()) * floor
    span = high - low
    return {k: (v - low) / span if span else 0.0 for k, v in scores.items()}


def fuse(words: Mapping[K, float], meaning: Mapping[K, float]) -> dict[K, float]:
    """Every key of either list, with its fused rank (before any exact-id bonus and quality)."""
    w, m = scaled(words, WORDS_FLOOR), scaled(meaning, MEANING_FLOOR)
    return {k: WORDS * w.get(k, 0.0) + MEANING * m.get(k, 0.0) for k in {**w, **m}}
