"""Search relevance on the relevance set (issue 16): a regression test of ranking, not timing.

The set (bench/relevance: the tools/list of 43 real MCP servers, the seed, and queries written
the way people ask, each with its expected tools) is loaded by bench/relevance/load.py into a
database of its own, kiwi_test_relevance (beside the registry under test, which is never
touched), built from the migrations and the seed and reused while they, the catalog and the
loader are unchanged. Each query is embedded with the local model and searched as the CLI
searches (search_tools with the query's embedding); bench/search_bench.py prints the same
figures with lexical and semantic beside them.
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.append(str(ROOT / "bench"))  # the relevance set's loader and measures live with the bench

from relevance.load import LONG_QUERIES, RelevanceDb, ensure_relevance_db, load_queries, missing_expected
from relevance.measure import ModeFigures, evaluate

from runner import LocalWordLlama
from runner.search.query import parse

DBNAME = "kiwi_test_relevance"
# Floors under what hybrid search reaches today with the bundled model (recall@5 0.873, MRR
# 0.725 on 2026-11-25), so that a change that makes search worse fails here. They are NOT
# the targets (recall@5 >= 0.95, MRR >= 0.8), which this model does not reach:
# bench/search_bench.py prints the figures against those targets, and the queries missed.
RECALL_AT_5 = 0.86
MRR = 0.71
# The long requests (long_queries.yaml: a task told in two or three sentences), under what words
# only and hybrid reach on them (0.810 / 0.593 and 0.857 / 0.646 on 2026-11-30, with BM25's
# term frequency; 0.762 / 0.569 and 0.810 / 0.639 with its length factor alone); before long
# documents weighed less for a long request, words only reached 0.571 / 0.365 there.
LONG_WORDS_RECALL_AT_5, LONG_WORDS_MRR = 0.76, 0.55
LONG_HYBRID_RECALL_AT_5, LONG_HYBRID_MRR = 0.81, 0.61


@pytest.fixture(scope="module")
def relevance_db(database_url: str) -> RelevanceDb:
    """Built (or reused) from the cluster of the registry under test; its own database."""
    return ensure_relevance_db(DBNAME, database_url, log=lambda _: None)


@pytest.fixture(scope="module")
def hybrid(relevance_db: RelevanceDb) -> ModeFigures:
    """Every query searched as the CLI searches: with its embedding (evaluate() fails unless
    search_tools answers in hybrid mode)."""
    db = relevance_db
    queries = load_queries()
    assert not missing_expected(db.url, queries), "queries.yaml names tools the catalog does not hold"
    embedder = LocalWordLlama()
    vectors = embedder.embed([parse(q.text).text for q in queries])
    return evaluate(db.url, queries, vectors, embedder.model)["hybrid"]


@pytest.fixture(scope="module")
def long_requests(relevance_db: RelevanceDb) -> dict[str, ModeFigures]:
    """The long requests, searched by words only and as the CLI searches (with the embedding)."""
    db = relevance_db
    queries = load_queries(LONG_QUERIES)
    assert not missing_expected(db.url, queries), "long_queries.yaml names tools the catalog does not hold"
    embedder = LocalWordLlama()
    vectors = embedder.embed([parse(q.text).text for q in queries])
    return evaluate(db.url, queries, vectors, embedder.model)


def _misses(figures: ModeFigures) -> str:
    rows = [
        f"  {a.query.text!r}: rank {a.rank or '-'}, expected {', '.join(a.query.written)}; "
        f"first {a.ranked[0] if a.ranked else '(nothing)'}"
        for a in figures.misses(5)
    ]
    return "\n".join(rows)


def test_the_relevance_set_is_as_large_as_the_issue_asks(relevance_db: RelevanceDb, hybrid: ModeFigures) -> None:
    """At least 300 tools from real MCP servers beside the seed, and at least 60 queries."""
    assert relevance_db.tools >= 300 + 19
    assert len(hybrid.answers) >= 60


def test_no_query_with_a_relevant_tool_returns_nothing(hybrid: ModeFigures) -> None:
    empty = [a.query.text for a in hybrid.answers if not a.ranked]
    assert not empty, f"hybrid search returned nothing for {empty}"


def test_hybrid_search_finds_the_expected_tool_in_the_first_five(hybrid: ModeFigures) -> None:
    recall = hybrid.recall(5)
    assert recall >= RECALL_AT_5, f"hybrid recall@5 {recall:.3f} < {RECALL_AT_5}; past the 5th:\n{_misses(hybrid)}"


def test_hybrid_search_ranks_the_expected_tool_near_the_top(hybrid: ModeFigures) -> None:
    mrr = hybrid.mrr
    assert mrr >= MRR, f"hybrid MRR {mrr:.3f} < {MRR} (recall@1 {hybrid.recall(1):.3f})"


def test_words_alone_find_what_a_long_request_describes(long_requests: dict[str, ModeFigures]) -> None:
    words = long_requests["lexical"]
    assert words.recall(5) >= LONG_WORDS_RECALL_AT_5 and words.mrr >= LONG_WORDS_MRR, (
        f"words only on long requests: recall@5 {words.recall(5):.3f}, MRR {words.mrr:.3f}; past the 5th:\n"
        + _misses(words)
    )


def test_hybrid_search_finds_what_a_long_request_describes(long_requests: dict[str, ModeFigures]) -> None:
    hybrid = long_requests["hybrid"]
    assert hybrid.recall(5) >= LONG_HYBRID_RECALL_AT_5 and hybrid.mrr >= LONG_HYBRID_MRR, (
        f"hybrid on long requests: recall@5 {hybrid.recall(5):.3f}, MRR {hybrid.mrr:.3f}; past the 5th:\n"
        + _misses(hybrid)
    )
