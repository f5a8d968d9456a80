"""One fusion: the weights search_tools reads from kiwi_internal.search_weights() are the ones
the in-process searches (local spaces, the in-memory registry) fuse with (runner/core/fusion.py)."""

from __future__ import annotations

import psycopg
import pytest

from runner.core import fusion


def test_the_in_process_fusion_has_the_registrys_weights(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "select words, meaning, quality, lexical_floor, meaning_floor from kiwi_internal.search_weights()"
    ).fetchone()
    assert row == pytest.approx(
        (fusion.WORDS, fusion.MEANING, fusion.QUALITY, fusion.WORDS_FLOOR, fusion.MEANING_FLOOR)
    )


def test_the_in_process_lexical_rank_has_the_registrys_weights(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "select per_word, per_word_fused, terms, name_field, tags_field, text_field, parameters_field"
        " from kiwi_internal.search_weights()"
    ).fetchone()
    assert row == pytest.approx((fusion.PER_WORD, fusion.PER_WORD_FUSED, fusion.TERMS, *fusion.FIELDS))


def test_the_in_process_length_and_query_frequency_factors_are_the_registrys(conn: psycopg.Connection) -> None:
    row = conn.execute(
        "select length_b, length_k1, length_pivot, length_from, length_full, query_k3"
        " from kiwi_internal.search_weights()"
    ).fetchone()
    expected = (fusion.LENGTH_B, fusion.LENGTH_K1, fusion.LENGTH_PIVOT, fusion.LENGTH_FROM, fusion.LENGTH_FULL)
    assert row == pytest.approx((*expected, fusion.QUERY_K3))
    assert fusion.length_factor(200, 3) == 1.0  # a short request: no length factor
    assert fusion.length_factor(200, 20) < fusion.length_factor(32, 20) == pytest.approx(1.0)
    assert fusion.query_weight(1) == 1.0 and 1.0 < fusion.query_weight(2) < 2.0


def test_each_list_is_scaled_between_its_best_and_its_floor() -> None:
    ranks = fusion.fuse({"a": 4.0, "b": 2.0}, {"b": 0.5, "c": 0.25})
    # words: a 1, b (2 - 1) / (4 - 1); meaning (floor 0): b 1, c 0.5
    assert ranks == pytest.approx({"a": 0.4, "b": 0.4 / 3 + 0.6, "c": 0.3})
