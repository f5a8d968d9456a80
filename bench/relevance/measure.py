"""Relevance of search over the relevance set: each query's ranking four ways, and the
figures issue 16 sets targets for (recall@1, recall@5, MRR, queries answered by nothing).

The four rankings, each the top DEPTH tools:
  lexical   public.search_tools(query) with no embedding (what the SQL editor gets);
  semantic  kiwi_internal.nearest_tools, as search_tools calls it in a hybrid search (the same
            list depth and similarity floor), as an admin: the meaning side alone;
  hybrid    public.search_tools(query, ..., embedding, model): what the CLI and MCP server get;
  bm25      the reference, not Kiwi: textbook Okapi BM25 (the `rank_bm25` package, k1 1.5,
            b 0.75) in Python over the same tools, each one document of the fields search_tools
            reads (id and name as words, tags, description, category, parameter names and
            descriptions), lower case, English stop words dropped, lightly stemmed
            (runner/search/local.py), the query tokenized alike. Words only should match it.

A query is answered at rank r when the first of its expected tools comes r-th. recall@k is
the share of queries answered within the first k (any expected tool counts: where several
tools do what is asked, each is a right answer); MRR the mean of 1/r (0 when not in the list).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

from runner.search.local import STOP_WORDS, stem, words_of

from .load import Query

MODES = ("lexical", "semantic", "hybrid", "bm25")
DEPTH = 20  # results looked at per query: search_tools' default page
SEMANTIC_DEPTH = 50  # search_tools asks nearest_tools for greatest(limit, 50)
SEMANTIC_FLOOR = 0.1  # and keeps those at least this similar (as search_tools does)

LEXICAL_Q = "select tool_id, search_mode from public.search_tools(%s, null, null, %s)"
HYBRID_Q = "select tool_id, search_mode, matched_by from public.search_tools(%s, null, null, %s, %s::real[], %s)"
SEMANTIC_Q = """
select t.ref from kiwi_internal.nearest_tools(%s, %s::real[]::extensions.vector, %s, %s::real,
                                              null, null, null, null) n
  join public.tools t on t.id = n.id
 order by n.similarity desc, n.id
 limit %s"""


# Each tool as BM25 reads it: the fields of kiwi_internal.tool_search_document, as text.
DOCUMENTS_Q = """
select t.ref, concat_ws(' ', t.tool_id, t.name, array_to_string(t.tags, ' '), t.description, t.category,
                        t.subcategory, kiwi_internal.parameters_search_text(v.manifest -> 'parameters'))
  from public.tools t
  left join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
 where t.visibility <> 'unlisted' and t.latest_version is not null
 order by t.ref"""


def bm25_tokens(text: str) -> list[str]:
    return [stem(w) for w in words_of(text) if w not in STOP_WORDS]


class Bm25Reference:
    """Okapi BM25 over the relevance database's tools (see the module's docstring)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        rows = conn.execute(DOCUMENTS_Q).fetchall()
        self.refs = [r[0] for r in rows]
        self.index = BM25Okapi([bm25_tokens(r[1]) for r in rows])

    def ranked(self, query: str, depth: int = DEPTH) -> list[str]:
        scores = self.index.get_scores(bm25_tokens(query))
        order = sorted(range(len(self.refs)), key=lambda i: (-scores[i], self.refs[i]))
        return [self.refs[i] for i in order[:depth] if scores[i] > 0]


@dataclass
class Answer:
    """One query's ranking in one mode."""

    query: Query
    ranked: list[str]
    matched_by: list[str] = field(default_factory=list)

    @property
    def rank(self) -> int | None:
        """1-based rank of the first expected tool, None when none is in the list."""
        wanted = set(self.query.expected)
        return next((i for i, ref in enumerate(self.ranked, 1) if ref in wanted), None)


@dataclass
class ModeFigures:
    mode: str
    answers: list[Answer]

    def recall(self, k: int) -> float:
        return sum(1 for a in self.answers if a.rank is not None and a.rank <= k) / len(self.answers)

    @property
    def mrr(self) -> float:
        return statistics.fmean(1 / a.rank if a.rank else 0.0 for a in self.answers)

    @property
    def empty(self) -> int:
        """Queries with a relevant tool (all of them) that returned nothing."""
        return sum(1 for a in self.answers if not a.ranked)

    def coverage(self, k: int) -> float:
        """Share of each query's expected tools in its first k (of at most k expected), averaged:
        how many of the right answers, not just the first, are seen."""
        return statistics.fmean(
            len(set(a.ranked[:k]) & set(a.query.expected)) / min(k, len(a.query.expected)) for a in self.answers
        )

    def misses(self, k: int) -> list[Answer]:
        return [a for a in self.answers if a.rank is None or a.rank > k]


def evaluate(
    url: str, queries: Sequence[Query], vectors: Sequence[Sequence[float]], model: str
) -> dict[str, ModeFigures]:
    """Every query in every mode, as the connecting superuser (an admin: every tool is visible,
    and the relevance set's are all public)."""
    out: dict[str, list[Answer]] = {m: [] for m in MODES}
    with psycopg.connect(url, autocommit=True) as conn:
        bm25 = Bm25Reference(conn)
        for query, vector in zip(queries, vectors, strict=True):
            out["bm25"].append(Answer(query, bm25.ranked(query.text)))
            vec = list(vector)
            rows = conn.execute(LEXICAL_Q, (query.text, DEPTH)).fetchall()
            out["lexical"].append(Answer(query, [r[0] for r in rows]))
            rows = conn.execute(SEMANTIC_Q, (model, vec, SEMANTIC_DEPTH, SEMANTIC_FLOOR, DEPTH)).fetchall()
            out["semantic"].append(Answer(query, [r[0] for r in rows]))
            rows = conn.execute(HYBRID_Q, (query.text, DEPTH, vec, model)).fetchall()
            modes = {r[1] for r in rows}
            if rows and modes != {"hybrid"}:
                raise RuntimeError(f"search_tools answered {modes} for {query.text!r}: are the tools embedded?")
            out["hybrid"].append(Answer(query, [r[0] for r in rows], [r[2] for r in rows]))
    return {m: ModeFigures(m, answers) for m, answers in out.items()}
