"""The relevance part of bench/search_bench.py: the relevance set's two sets of requests measured
four ways (relevance/measure.py), reported, and judged.

* the queries (queries.yaml): short requests, as people ask for a tool;
* the long requests (long_queries.yaml): a task told in two or three sentences with its
  context, where a long tool description shares many common words with the request by chance.

Targets, on each set: hybrid >= max(words only, meaning only) on recall@5 and MRR, and words
only >= the reference BM25; on the short queries also hybrid recall@5 >= 0.95, MRR >= 0.8 and
every query answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from report import Verdict, table

from runner import LocalWordLlama
from runner.search.query import parse

from .load import (
    DEFAULT_DB,
    LONG_QUERIES,
    QUERIES,
    database_url,
    ensure_relevance_db,
    load_queries,
    missing_expected,
)
from .measure import DEPTH, MODES, ModeFigures, evaluate


@dataclass
class QuerySet:
    name: str  # "queries", "long requests"
    queries: int
    figures: dict[str, ModeFigures]


@dataclass
class Relevance:
    dbname: str
    tools: int
    short: QuerySet
    long: QuerySet


def measure(admin_url: str, relevance_db: str | None, rebuild: bool, log: Callable[[str], None]) -> Relevance:
    """Both sets over the relevance database (built when missing or stale; `relevance_db`: a
    copy measured as it is)."""
    if relevance_db:
        dbname, url = relevance_db, database_url(admin_url, relevance_db)
    else:
        db = ensure_relevance_db(DEFAULT_DB, admin_url, rebuild=rebuild, log=log)
        dbname, url = db.dbname, db.url
    embedder = LocalWordLlama()
    sets = []
    for name, path in (("queries", QUERIES), ("long requests", LONG_QUERIES)):
        sets.append(_measured(name, path, url, dbname, embedder))
    with psycopg.connect(url) as conn:
        row = conn.execute("select count(*) from public.tools").fetchone()
    return Relevance(dbname, int(row[0]) if row else 0, *sets)


def _measured(name: str, path: Path, url: str, dbname: str, embedder: LocalWordLlama) -> QuerySet:
    queries = load_queries(path)
    missing = missing_expected(url, queries)
    if missing:
        raise SystemExit(f"{dbname}: expected tools the relevance set lacks ({path.name}): {', '.join(missing)}")
    vectors = embedder.embed([parse(q.text).text for q in queries])
    return QuerySet(name, len(queries), evaluate(url, queries, vectors, embedder.model))


def section(r: Relevance) -> list[str]:
    parts = [
        f"## B. Relevance over {r.tools} tools ({r.dbname})",
        "",
        f"Top {DEPTH} per query; a query is answered at the rank of the first of its expected tools. "
        "coverage@5: share of a query's expected tools (at most 5) in its first 5.",
        "",
    ]
    for s in (r.short, r.long):
        parts += _set_section(s)
    return parts


def _set_section(s: QuerySet) -> list[str]:
    hybrid = s.figures["hybrid"]
    return [
        f"### {s.name[0].upper()}{s.name[1:]}: {s.queries}",
        "",
        table(
            ["mode", "recall@1", "recall@5", "MRR", "returned nothing", "coverage@5"],
            [
                [
                    m,
                    f"{s.figures[m].recall(1):.3f}",
                    f"{s.figures[m].recall(5):.3f}",
                    f"{s.figures[m].mrr:.3f}",
                    str(s.figures[m].empty),
                    f"{s.figures[m].coverage(5):.3f}",
                ]
                for m in MODES
            ],
        ),
        "",
        f"Hybrid misses (not in the first 5): {len(hybrid.misses(5))}",
        "",
        table(
            ["query", "rank", "expected", "first (matched by)"],
            [
                [
                    a.query.text,
                    str(a.rank) if a.rank else "-",
                    ", ".join(a.query.written),
                    f"{a.ranked[0]} ({a.matched_by[0]})" if a.ranked else "(nothing)",
                ]
                for a in hybrid.misses(5)
            ],
        ),
        "",
    ]


def verdicts(r: Relevance) -> list[Verdict]:
    h = r.short.figures["hybrid"]
    out = [
        Verdict("hybrid recall@5", h.recall(5), "", ">=", 0.95),
        Verdict("hybrid MRR", h.mrr, "", ">=", 0.8),
        Verdict("hybrid: share of queries that return something", 1 - h.empty / r.short.queries, "", ">=", 1),
    ]
    for s, on in ((r.short, ""), (r.long, "long requests: ")):
        hyb, lex, sem, ref = (s.figures[m] for m in ("hybrid", "lexical", "semantic", "bm25"))
        out += [
            Verdict(
                f"{on}hybrid recall@5 >= max(words, meaning)",
                hyb.recall(5),
                "",
                ">=",
                max(lex.recall(5), sem.recall(5)),
            ),
            Verdict(f"{on}hybrid MRR >= max(words, meaning)", hyb.mrr, "", ">=", max(lex.mrr, sem.mrr)),
            Verdict(f"{on}words only recall@5 >= the BM25 reference", lex.recall(5), "", ">=", ref.recall(5)),
            Verdict(f"{on}words only MRR >= the BM25 reference", lex.mrr, "", ">=", ref.mrr),
        ]
    return out
