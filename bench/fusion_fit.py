"""Could a fusion learned on the relevance set beat search_tools' fixed one? Measured, not assumed.

For each query of the relevance set (bench/relevance, the database bench/relevance/load.py
builds) it reads search_tools' lexical list as a hybrid search ranks it (its ranks, top 50)
and nearest_tools' semantic list (similarities, top 50), as search_tools fuses them, and then:

* the ceiling: the share of queries with an expected tool in either list's first 20 (and 50):
  no fusion of these two lists can find more;
* the fixed fusion: each list scaled between its best and a floor (kiwi_internal.search_weights:
  0.4 words, 0.6 meaning), as search_tools does, with the lexical list 50 deep;
* learned fusions: linear weights over features of each candidate (both scaled scores, both
  reciprocal ranks, the raw similarity, their product, being in both lists), fitted by random
  search on recall@5 + MRR, judged by 5-fold cross-validation (fitted on four fifths, scored
  on the fifth it never saw), and once fitted on every query (what overfitting reaches).

Run:  .venv/bin/python bench/fusion_fit.py [--iterations 600]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from embedding_text_fit import fused_lexical_lists
from relevance.load import DEFAULT_DB, Query, database_url, ensure_relevance_db, load_queries
from synthetic import DEFAULT_ADMIN_URL

from runner import LocalWordLlama
from runner.search.query import parse

SEMANTIC_Q = """
select t.ref, n.similarity from kiwi_internal.nearest_tools(%s, %s::real[]::extensions.vector, 50, 0.1::real,
                                                            null, null, null, null) n
  join public.tools t on t.id = n.id
 order by n.similarity desc, t.ref"""
FEATURES = ("words", "meaning", "1/(5+rank words)", "1/(5+rank meaning)", "similarity", "words x meaning", "in both")
FIXED = (0.4, 0.6, 0.0, 0.0, 0.0, 0.0, 0.0)
Ranked = list[tuple[str, float]]


@dataclass
class Lists:
    query: Query
    words: Ranked
    meaning: Ranked

    def candidates(self) -> dict[str, tuple[float, ...]]:
        """Each tool of either list with its features (FEATURES)."""
        lexical = [(ref, score - 100 if score >= 100 else score) for ref, score in self.words]  # no exact-id bonus
        w, m = scaled(lexical, 0.5), scaled(self.meaning, 0.0)
        rank_w = {ref: 1 / (i + 5) for i, (ref, _) in enumerate(lexical)}
        rank_m = {ref: 1 / (i + 5) for i, (ref, _) in enumerate(self.meaning)}
        similarity = dict(self.meaning)
        return {
            ref: (
                w.get(ref, 0.0),
                m.get(ref, 0.0),
                rank_w.get(ref, 0.0),
                rank_m.get(ref, 0.0),
                similarity.get(ref, 0.0),
                w.get(ref, 0.0) * m.get(ref, 0.0),
                1.0 if ref in w and ref in m else 0.0,
            )
            for ref in {**w, **m}
        }


def scaled(items: Ranked, floor: float) -> dict[str, float]:
    """Scores between the best (1) and floor x the worst (0), as search_tools scales them."""
    if not items:
        return {}
    high, low = max(s for _, s in items), min(s for _, s in items) * floor
    return {ref: (s - low) / (high - low) if high > low else 0.0 for ref, s in items}


def fetch(url: str, queries: Sequence[Query]) -> list[Lists]:
    embedder = LocalWordLlama()
    vectors = embedder.embed([parse(q.text).text for q in queries])
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        lexical = fused_lexical_lists(conn, queries)  # as a hybrid search ranks words (per_word_fused)
        for query, vector, words in zip(queries, vectors, lexical, strict=True):
            meaning = [
                (str(r[0]), float(r[1])) for r in conn.execute(SEMANTIC_Q, (embedder.model, list(vector))).fetchall()
            ]
            out.append(Lists(query, words, meaning))
    return out


def scores(
    weights: Sequence[float], data: Sequence[dict[str, tuple[float, ...]]], queries: Sequence[Query]
) -> tuple[float, float]:
    """recall@5 and MRR (of the first 20) of the ranking these weights make."""
    hits = rr = 0.0
    for candidates, query in zip(data, queries, strict=True):
        ranked = sorted(
            candidates, key=lambda ref: (-sum(a * b for a, b in zip(weights, candidates[ref], strict=True)), ref)
        )
        rank = next((i for i, ref in enumerate(ranked[:20], 1) if ref in query.expected), None)
        if rank:
            hits += rank <= 5
            rr += 1 / rank
    return hits / len(queries), rr / len(queries)


def fit(
    data: Sequence[dict[str, tuple[float, ...]]], queries: Sequence[Query], iterations: int, seed: int
) -> list[float]:
    """Weights found by random search from the fixed ones, on recall@5 + MRR."""
    rng = random.Random(seed)
    best, best_score = list(FIXED), sum(scores(FIXED, data, queries))
    for _ in range(iterations):
        trial = [max(0.0, w + rng.gauss(0, 0.15)) for w in best]
        score = sum(scores(trial, data, queries))
        if score > best_score:
            best, best_score = trial, score
    return best


def cross_validated(lists: Sequence[Lists], iterations: int, folds: int = 5) -> tuple[float, float]:
    order = list(range(len(lists)))
    random.Random(1).shuffle(order)
    hits = rr = 0.0
    for k in range(folds):
        held = set(order[k::folds])
        train = [x for i, x in enumerate(lists) if i not in held]
        test = [x for i, x in enumerate(lists) if i in held]
        weights = fit([x.candidates() for x in train], [x.query for x in train], iterations, seed=k)
        r5, mrr = scores(weights, [x.candidates() for x in test], [x.query for x in test])
        hits, rr = hits + r5 * len(test), rr + mrr * len(test)
    return hits / len(lists), rr / len(lists)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=600, help="random-search steps per fit (%(default)s)")
    args = parser.parse_args()
    ensure_relevance_db(DEFAULT_DB, DEFAULT_ADMIN_URL)
    lists = fetch(database_url(DEFAULT_ADMIN_URL, DEFAULT_DB), load_queries())
    queries = [x.query for x in lists]
    data = [x.candidates() for x in lists]
    for depth in (20, 50):
        found = sum(
            1
            for x in lists
            if set(x.query.expected) & ({r for r, _ in x.words[:depth]} | {r for r, _ in x.meaning[:depth]})
        )
        print(f"ceiling: an expected tool in either list's first {depth}: {found / len(lists):.3f}")
    r5, mrr = scores(FIXED, data, queries)
    print(f"fixed fusion (0.4 words, 0.6 meaning): recall@5 {r5:.3f}, MRR {mrr:.3f}")
    r5, mrr = cross_validated(lists, args.iterations)
    print(f"learned fusion, 5-fold cross-validated: recall@5 {r5:.3f}, MRR {mrr:.3f}")
    weights = fit(data, queries, args.iterations * 2, seed=0)
    r5, mrr = scores(weights, data, queries)
    print(f"learned fusion, fitted on every query (overfit): recall@5 {r5:.3f}, MRR {mrr:.3f}")
    print("  weights: " + ", ".join(f"{name} {w:.2f}" for name, w in zip(FEATURES, weights, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
