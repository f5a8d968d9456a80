"""A search request cannot make search_tools repeat its work per word it repeats.

Regression: once a repeated word counted as its term's weight (BM25's query frequency), the
request's words were read with their repeats, and a word no tool has went to the typo search
(a trigram lookup of the vocabulary) each time it was said: one request of 2,000 characters
repeating a made-up word made hundreds of lookups, which any caller, anonymous ones included,
could send again and again. Each stem is now looked up once."""

from __future__ import annotations

import psycopg


def test_a_word_said_many_times_is_looked_up_and_corrected_once(conn: psycopg.Connection) -> None:
    with conn.transaction():
        conn.execute("set local track_functions = 'all'")
        rows = conn.execute("select count(*) from search_tools(%s, null, null, 20)", (" ".join(["qzxwvkj"] * 200),))
        assert rows.fetchone() == (0,)
        calls = conn.execute(
            "select calls from pg_stat_xact_user_functions"
            " where schemaname = 'kiwi_internal' and funcname = 'similar_search_words'"
        ).fetchone()
    assert calls == (1,), calls
