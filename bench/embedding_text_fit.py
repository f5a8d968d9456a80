"""Which text of a tool should the bundled model embed, and how? Measured, not assumed.

The bundled model (wordllama) averages its tokens' vectors, so a long text dilutes what a
tool does. Over the relevance set (bench/relevance, the database bench/relevance/load.py
builds) this embeds the tools' texts several ways in process and ranks them by exact cosine
(as nearest_tools: 50 deep, at least 0.1 similar), then fuses each with search_tools' own
lexical list as search_tools fuses (kiwi_internal.search_weights: each list scaled between
its best and a floor; the lexical list as a hybrid search ranks it, per_word_fused a word).
The variants:

* full: tools.search_text, what is stored today (id and name as words, description, tags,
  parameter names);
* summary: id and name, and the description's first sentence;
* two vectors a tool, their similarities mixed (0.7 full + 0.3 summary), or one vector of
  both (normalise(0.7 full + 0.3 summary): one vector, the index unchanged), or of full and
  its own first two sentences (which an embedder could compute from the stored text alone);
* the best of the description's sentences (each with the name), mixed with full;
* the query with English stop words dropped.

Each is reported on every query and on the even- and odd-numbered halves, so that a variant
chosen on one half can be judged on the other.

Run:  .venv/bin/python bench/embedding_text_fit.py
"""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Callable, Sequence

import numpy as np
import psycopg
from relevance.load import DEFAULT_DB, Query, ensure_relevance_db, load_queries
from synthetic import DEFAULT_ADMIN_URL

from runner import LocalWordLlama
from runner.search.local import STOP_WORDS
from runner.search.query import parse

DEPTH, FLOOR = 50, 0.1  # nearest_tools as search_tools asks it
TOOLS_Q = """
select t.ref, kiwi_internal.search_words_of(t.tool_id)
              || case when lower(coalesce(t.name, '')) = lower(t.tool_id) then ''
                      else ' ' || kiwi_internal.search_words_of(coalesce(t.name, '')) end,
       coalesce(t.description, ''), t.search_text, t.quality_score
  from public.tools t
 where t.visibility <> 'unlisted' and t.latest_version is not null
 order by t.ref"""
WEIGHTS_Q = "select words, meaning, quality, lexical_floor, meaning_floor from kiwi_internal.search_weights()"
Ranked = list[tuple[str, float]]
EXACT = 100.0  # search_tools' bonus for the exact id, kept out of the scaled score


def fused_lexical_lists(conn: psycopg.Connection, queries: Sequence[Query]) -> list[Ranked]:
    """search_tools' lexical list as a hybrid search ranks it (per_word_fused a word): read in
    a transaction where search_weights' per_word is per_word_fused, then rolled back."""
    row = conn.execute("select pg_get_functiondef('kiwi_internal.search_weights()'::regprocedure)").fetchone()
    assert row is not None
    names = [r[0] for r in conn.execute("select * from kiwi_internal.search_weights() limit 0").description or []]
    values = conn.execute("select * from kiwi_internal.search_weights()").fetchone()
    assert values is not None
    stored = dict(zip(names, values, strict=True))
    fused = stored | {"per_word": stored["per_word_fused"]}
    body = ", ".join(f"{float(fused[n])}::float8" for n in names)
    with conn.transaction(force_rollback=True):
        conn.execute(re.sub(r"AS \$function\$.*\$function\$", f"AS $f$ select {body} $f$", row[0], flags=re.S))
        q = "select tool_id, rank from public.search_tools(%s, null, null, 50)"
        return [[(str(r[0]), float(r[1])) for r in conn.execute(q, (x.text,)).fetchall()] for x in queries]


def scaled(items: Ranked, floor: float) -> dict[str, float]:
    """Scores between the best (1) and floor x the worst (0), as search_tools scales them."""
    if not items:
        return {}
    high, low = max(s for _, s in items), min(s for _, s in items) * floor
    return {ref: (s - low) / (high - low) if high > low else 0.0 for ref, s in items}


def figures(ranked: Sequence[Sequence[str]], queries: Sequence[Query], part: range) -> tuple[float, float]:
    """recall@5 and MRR (of the first 20) over the queries in `part`."""
    ranks = [next((k for k, r in enumerate(ranked[i][:20], 1) if r in queries[i].expected), None) for i in part]
    return sum(1 for r in ranks if r and r <= 5) / len(ranks), statistics.fmean(1 / r if r else 0.0 for r in ranks)


def normalised(m: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(n > 0, n, 1)


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s+|\n\s*\n", text.strip(), maxsplit=1)[0]


def best_sentence(
    embed: Callable[[list[str]], np.ndarray], q: np.ndarray, names: list[str], texts: list[str]
) -> np.ndarray:
    """Per query and tool, the best similarity among the description's sentences (each with the name)."""
    chunks: list[str] = []
    owner: list[int] = []
    for j, (name, text) in enumerate(zip(names, texts, strict=True)):
        parts = [p for p in re.split(r"(?<=[.!?])\s+|\n+", text.strip()) if len(p.split()) >= 3][:6]
        for p in [f"{name}. {p}" for p in parts] or [name]:
            chunks.append(p)
            owner.append(j)
    sims = q @ embed(chunks).T
    best = np.full((q.shape[0], len(names)), -1.0, dtype=np.float32)
    for k, j in enumerate(owner):
        np.maximum(best[:, j], sims[:, k], out=best[:, j])
    return best


def main() -> int:
    url = ensure_relevance_db(DEFAULT_DB, DEFAULT_ADMIN_URL).url
    queries = load_queries()
    with psycopg.connect(url, autocommit=True) as conn:
        tools = conn.execute(TOOLS_Q).fetchall()
        lexical = fused_lexical_lists(conn, queries)
        weights = conn.execute(WEIGHTS_Q).fetchone()
    assert weights is not None
    words, meaning, quality_w, lexical_floor, meaning_floor = (float(w) for w in weights)
    refs = [str(t[0]) for t in tools]
    quality = {str(t[0]): float(t[4] or 0) for t in tools}
    model = LocalWordLlama()

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.embed(texts), dtype=np.float32)

    texts = [parse(q.text).text for q in queries]
    q = embed(texts)
    names = [str(t[1]) for t in tools]
    full = embed([str(t[3]) for t in tools])
    summary = embed([f"{n}. {first_sentence(str(t[2]))}" for n, t in zip(names, tools, strict=True)])
    opening = embed([" ".join(re.split(r"(?<=[.!?])\s+", str(t[3]).strip())[:2]) for t in tools])
    sentences = best_sentence(embed, q, names, [str(t[2]) for t in tools])
    bare = embed([" ".join(w for w in t.split() if re.sub(r"[^a-z']", "", w.lower()) not in STOP_WORDS) for t in texts])
    variants = {
        "full (stored today)": q @ full.T,
        "summary": q @ summary.T,
        "0.7 full + 0.3 summary (two vectors)": 0.7 * (q @ full.T) + 0.3 * (q @ summary.T),
        "one vector of 0.7 full + 0.3 summary": q @ normalised(0.7 * full + 0.3 * summary).T,
        "one vector of 0.8 full + 0.2 its first two sentences": q @ normalised(0.8 * full + 0.2 * opening).T,
        "0.7 full + 0.3 best sentence": 0.7 * (q @ full.T) + 0.3 * sentences,
        "full, query without stop words": bare @ full.T,
    }
    halves = {"all": range(len(queries)), "even": range(0, len(queries), 2), "odd": range(1, len(queries), 2)}
    print("variant | semantic r@5 / MRR | hybrid r@5 / MRR: all | even | odd")
    for name, sims in variants.items():
        meaning_lists = []
        for i in range(len(queries)):
            order = np.argsort(-sims[i], kind="stable")[:DEPTH]
            meaning_lists.append([(refs[j], float(sims[i, j])) for j in order if sims[i, j] >= FLOOR])
        hybrid = []
        for lex, near in zip(lexical, meaning_lists, strict=True):
            exact = {r for r, s in lex if s >= EXACT}
            w = scaled([(r, s - EXACT if r in exact else s) for r, s in lex], lexical_floor)
            m = scaled(near, meaning_floor)
            score = {
                r: EXACT * (r in exact) + words * w.get(r, 0) + meaning * m.get(r, 0) + quality_w * quality[r]
                for r in {**w, **m}
            }
            hybrid.append(sorted(score, key=lambda r: (-score[r], r)))
        sem = figures([[r for r, _ in x] for x in meaning_lists], queries, halves["all"])
        cells = " | ".join("{:.3f} / {:.3f}".format(*figures(hybrid, queries, part)) for part in halves.values())
        print(f"{name} | {sem[0]:.3f} / {sem[1]:.3f} | {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
