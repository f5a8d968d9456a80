"""Lexical ranking (search_tools without an embedding, as the SQL editor searches): typos and
long requests. Each word weighs by its idf (BM25's), so a rare word of a long request is not
drowned by its common ones, and a word no tool has is read as its closest known spellings."""

from __future__ import annotations

from collections.abc import Callable

import psycopg


def _found(conn: psycopg.Connection, query: str) -> list[str]:
    return [r[0] for r in conn.execute("select tool_id from search_tools(%s, null, null, 20)", (query,)).fetchall()]


def test_two_typos_in_a_two_word_request_still_find_the_tool(
    conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "weather",
        {"tool_type": "knowledge", "tags": ["forecast"], "description": "Tomorrow's weather forecast for a city."},
    )
    found = _found(conn, "wether forcast")
    assert found and found[0] == tool, found


def test_a_long_request_of_common_words_ranks_the_tool_with_its_rare_word_first(
    conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    common = [
        publish_tool(
            f"list_data_files_{i}",
            {"tool_type": "knowledge", "description": f"Get a list of the data files and show them ({i})."},
        )
        for i in range(6)
    ]
    rare = publish_tool(
        "pods",
        {"tool_type": "knowledge", "description": "Show the pods of a Kubernetes cluster."},
    )
    found = _found(conn, "get me the list of data files and show the kubernetes pods")
    assert found and found[0] == rare, found
    assert set(common) <= set(found), found  # the common words still find the others, after it
