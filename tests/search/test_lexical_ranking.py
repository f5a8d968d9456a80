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


# A task told in three sentences, as people write to an agent: a handful of words say what is
# wanted (stash, uncommitted, changes), the rest is context any long description may share.
LONG_REQUEST = (
    "I was halfway through a change to the billing page when an urgent bug came in from a customer. "
    "I do not want to commit the half finished work yet, so please put my uncommitted changes aside "
    "somewhere safe and give me a clean working tree to start from."
)


def test_a_long_request_ranks_the_short_tool_it_describes_above_long_ones_that_share_its_words(
    conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    """Regression: the words of a long request were counted alike in a tool of a few words and in
    one of a hundred, so long descriptions, which share many of a request's everyday words by
    chance, came first (on the relevance set's long requests words only found the right tool in
    the first five for 0.57 of them, against 0.79 for BM25). For a long request the words now
    weigh less in a long document (BM25's length factor), and a word the request repeats more."""
    chatty = [
        publish_tool(
            f"workspace_assistant_{i}",
            {
                "tool_type": "knowledge",
                "description": (
                    f"An assistant for the day ({i}). It reads what came in from a customer overnight, "
                    "a bug or a billing question, opens the page of each request, sorts them by how urgent "
                    "they are and drafts a reply for you to check before it is sent. Half finished replies "
                    "are kept in a folder of drafts, with the history of every conversation, "
                    "the people in it and the orders they placed, so that nobody on the team answers twice "
                    "and no question is left without an answer at the end of the week. Start it in the "
                    "morning and give it a list of priorities."
                ),
            },
        )
        for i in range(3)
    ]
    stash = publish_tool(
        "stash_changes",
        {"tool_type": "knowledge", "description": "Stash uncommitted changes, leaving a clean working tree."},
    )
    found = _found(conn, LONG_REQUEST)
    assert found and found[0] == stash, found
    assert set(chatty) <= set(found), found  # still found by their words, after it


# Two tools alike but for how often they say the request's word "error": one says it four
# times, the other once; the words of the request they have are the same.
_DIGEST = (
    "A digest of what the monitoring service captured for a web app in production since its last "
    "release: each entry with its time, its page and the people who saw it. {said}"
)
ERRORS_REQUEST = (
    "Users are reporting errors in production since this morning's release. Look up the errors that "
    "our error monitoring service captured for the web app today so we can see what is going wrong."
)


def test_a_long_request_ranks_the_tool_that_says_its_word_often_above_one_that_says_it_once(
    conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    """BM25's term frequency, for a long request: of two tools with the same words, the one that
    says the request's word again and again is about it. Before, the words' part of the rank
    counted the word once in each, and the length factor (a little lower for the one with two
    more words) put the once-only tool first."""
    once = publish_tool(
        "digest_a", {"tool_type": "knowledge", "description": _DIGEST.format(said="An error is an entry too.")}
    )
    often = publish_tool(
        "digest_b",
        {
            "tool_type": "knowledge",
            "description": _DIGEST.format(said="Errors: an error, the error's page, every error again: an entry."),
        },
    )
    found = _found(conn, ERRORS_REQUEST)
    assert found[:2] == [often, once], found
