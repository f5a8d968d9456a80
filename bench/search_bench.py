"""Kiwi search benchmark (issue 16): hybrid search latency at 100k tools, and relevance.

A. Latency, on the synthetic registries of bench/synthetic.py (kiwi_bench_<n>, built once):
   1. embedding every pending searchable text with the local model and storing it, as
      `kiwi embed` does (runner/search: embed_pending): the 10k registry is embedded anew on
      every run (its vectors deleted first): <= 60 s; the largest is embedded when it has
      texts pending (after a build, or with --reembed), its time kept in kiwi_bench.embed_runs;
   2. the query's embedding in-process (LocalWordLlama), median over the query mix: <= 5 ms;
   3. search_tools(q, null, null, 20, <embedding>, <model>) client round trip at the largest
      size, median over the mix, as a signed-in caller (role authenticated, the JWT claims of
      a member of one namespace, as PostgREST calls it; registry_bench's d): <= 15 ms, and
      lexical only (no embedding) <= 15 ms; the connecting superuser's figures beside them,
      all four interleaved; server-side times of both (signed in) and of
      kiwi_internal.nearest_tools alone, to see where the time goes; EXPLAIN (analyze) of one
      hybrid query and of nearest_tools' own query.
B. Relevance, on the relevance set (bench/relevance: catalog.json of real MCP servers'
   tools/list plus the seed; queries.yaml, short requests, and long_queries.yaml, tasks told in
   two or three sentences), loaded by bench/relevance/load.py into kiwi_bench_relevance:
   recall@1, recall@5, MRR and queries that returned nothing for lexical only, semantic only,
   hybrid, and a reference BM25 (rank_bm25, in Python, over the same tools:
   bench/relevance/measure.py), each set apart (bench/relevance/figures.py). Targets: hybrid
   recall@5 >= 0.95, MRR >= 0.8 and every query answered (the short queries); on both sets,
   hybrid >= max(words, meaning) on both figures and words only >= the BM25 reference.

Run:  .venv/bin/python bench/search_bench.py [--sizes 10000,100000] [--rebuild] [--reembed]
      [--parts latency,relevance] [--relevance-db NAME  (measure a copy as it is)]
The report also goes to bench/results/search.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader
from registry_bench import (
    SIGNED_IN_NAMESPACE,
    connect,
    connect_signed_in,
    environment,
    fetched,
    median,
    p95,
    timed_ms,
)
from registry_bench import install_helpers as install_registry_helpers

# (importing relevance.load puts the repository on sys.path: the runner package below)
from relevance import figures as relevance_figures
from report import Verdict, git_commit, summary, table
from synthetic import DEFAULT_ADMIN_URL, ROOT, Registry, ensure_registry, parse_sizes

from runner import LocalWordLlama, PostgresRegistry, admin, embed_pending
from runner.search.query import parse

RESULTS_FILE = ROOT / "bench" / "results" / "search.md"
EMBED_SIZE = 10_000  # the registry whose embedding is timed on every run
SEARCH_REPS = 30  # per query and mode
EMBED_REPS = 200  # per query, query embedding

# Sentences as people ask for a tool, then a few of registry_bench's queries.
QUERY_MIX: list[str] = [
    "send a message to a slack channel",
    "create pull request",
    "count words in text",
    "query postgres database",
    "convert a csv file to json",
    "resize an image to a thumbnail",
    "translate this paragraph into french",
    "what's the weather forecast for tomorrow",
    "summarize a long pdf report",
    "schedule a meeting on my calendar",
    "markdown",
    "convert pdf",
    "invoce",
    "kubernets",
    "type:python csv",
]

# kiwi_bench: timing helpers beside registry_bench's, in the bench databases only.
SERVER_HELPERS = """
create schema if not exists kiwi_bench;
create table if not exists kiwi_bench.embed_runs (
  model text not null, texts int not null, seconds float8 not null, at timestamptz not null default now());

create or replace function kiwi_bench.time_hybrid(p_query text, p_embedding real[], p_model text, p_rounds int)
  returns float8[] language plpgsql volatile set search_path = '' as $$
declare v_ms float8[] := '{}'; v_t0 timestamptz;
begin
  for i in 1 .. p_rounds loop
    v_t0 := clock_timestamp();
    perform * from public.search_tools(p_query, null, null, 20, p_embedding, p_model);
    v_ms := v_ms || (extract(epoch from clock_timestamp() - v_t0) * 1000)::float8;
  end loop;
  return v_ms;
end $$;

create or replace function kiwi_bench.time_nearest(p_embedding real[], p_model text, p_rounds int)
  returns float8[] language plpgsql volatile set search_path = '' as $$
declare v_ms float8[] := '{}'; v_t0 timestamptz;
begin
  for i in 1 .. p_rounds loop
    v_t0 := clock_timestamp();
    perform * from kiwi_internal.nearest_tools(p_model, p_embedding::extensions.vector(256), 50, 0.1,
                                               null, null, null, null);
    v_ms := v_ms || (extract(epoch from clock_timestamp() - v_t0) * 1000)::float8;
  end loop;
  return v_ms;
end $$;
"""

HYBRID_Q = "select * from public.search_tools(%s, null, null, 20, %s::real[], %s)"
LEXICAL_Q = "select * from public.search_tools(%s, null, null, 20)"
SEARCH_MODE = 10  # search_tools' columns: ..., rank, matched_by, search_mode, content_hash, signatures

# nearest_tools' query as it runs it (20261121001510, filters all null, an admin caller),
# prepared so that EXPLAIN shows the plan the function gets.
NEAREST_PREPARE = """
prepare bench_nearest(text, extensions.vector(256), int, real) as
select n.id, n.similarity::real from (
  select t.id, 1 - (e.embedding operator(extensions.<=>) $2) as similarity
    from kiwi_internal.search_embeddings e
    join public.tools t on t.search_text_hash = e.text_hash
   where e.model = $1
     and (t.visibility = 'public' or (t.visibility = 'private' and true))
     and t.visibility <> 'unlisted' and t.latest_version is not null
   order by e.embedding operator(extensions.<=>) $2
   limit $3) n
 where n.similarity >= $4"""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class TimedEmbedder:
    """The embedder, with the time spent in its own `embed` summed (the rest is the registry's)."""

    def __init__(self, inner: LocalWordLlama) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


@dataclass
class EmbedRun:
    registry: str
    texts: int
    seconds: float
    model_seconds: float  # of which, the model's own embedding
    measured_now: bool = True
    when: str = ""


@dataclass
class Latency:
    """Everything measured on the largest registry (times in ms)."""

    registry: Registry
    embed_runs: list[EmbedRun] = field(default_factory=list)
    model_load_ms: float = 0.0
    caller: str = ""  # who the judged figures are of
    query_embed: dict[str, list[float]] = field(default_factory=dict)
    hybrid: dict[str, list[float]] = field(default_factory=dict)  # as the judged caller
    lexical: dict[str, list[float]] = field(default_factory=dict)
    hybrid_admin: dict[str, list[float]] = field(default_factory=dict)  # as the superuser
    lexical_admin: dict[str, list[float]] = field(default_factory=dict)
    hybrid_server: dict[str, list[float]] = field(default_factory=dict)
    lexical_server: dict[str, list[float]] = field(default_factory=dict)
    nearest_server: dict[str, list[float]] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)
    explain: dict[str, list[str]] = field(default_factory=dict)

    def pooled(self, name: str) -> list[float]:
        return [ms for samples in getattr(self, name).values() for ms in samples]


# --------------------------------------------------------------------------------------
# A. Latency
# --------------------------------------------------------------------------------------


def install_helpers(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SERVER_HELPERS)


async def _embed(url: str, embedder: TimedEmbedder) -> int:
    async with PostgresRegistry(url, principal=admin(), max_size=2) as registry:
        return await embed_pending(registry, embedder, batch=256, progress=False)


def embed_registry(registry: Registry, *, fresh: bool) -> EmbedRun | None:
    """Embeds what is pending (all of it when `fresh`: its vectors are deleted first) and
    records the run; None when nothing was pending (the last recorded run is reported)."""
    model = LocalWordLlama.model
    with psycopg.connect(registry.url, autocommit=True) as conn:
        if fresh:
            conn.execute("delete from kiwi_internal.search_embeddings where model = %s", (model,))
            conn.execute("vacuum (analyze) kiwi_internal.search_embeddings")
    embedder = TimedEmbedder(LocalWordLlama())
    embedder.embed(["warm the model up"])  # its load is not the registry's embedding time
    embedder.seconds = 0.0
    _log(f"[search] {registry.dbname}: embedding pending texts")
    started = time.perf_counter()
    count = asyncio.run(_embed(registry.url, embedder))
    seconds = time.perf_counter() - started
    with psycopg.connect(registry.url, autocommit=True) as conn:
        if count:
            conn.execute("vacuum (analyze) kiwi_internal.search_embeddings")
            conn.execute(
                "insert into kiwi_bench.embed_runs (model, texts, seconds) values (%s, %s, %s)", (model, count, seconds)
            )
            _log(f"[search] {registry.dbname}: embedded {count} texts in {seconds:.1f}s")
            return EmbedRun(registry.dbname, count, seconds, embedder.seconds)
        row = conn.execute(
            "select texts, seconds, to_char(at, 'YYYY-MM-DD HH24:MI') from kiwi_bench.embed_runs"
            " where model = %s order by at desc limit 1",
            (model,),
        ).fetchone()
    if row is None:
        return None
    return EmbedRun(registry.dbname, row[0], row[1], float("nan"), measured_now=False, when=row[2])


def server_times(conn: psycopg.Connection, call: str, args: tuple[object, ...]) -> list[float]:
    row = conn.execute(sql.SQL(call), args).fetchone()
    assert row is not None
    return list(row[0])


def explain(conn: psycopg.Connection, statement: str) -> list[str]:
    """EXPLAIN (analyze, buffers) lines, vectors and long sort keys shortened."""
    rows = conn.execute(f"explain (analyze, buffers, costs off) {statement}").fetchall()
    return [_short(r[0]) for r in rows]


def _short(line: str, width: int = 220) -> str:
    line = re.sub(r"'\[[-0-9.e,]+\]'", "'[256 numbers]'", line)
    return line if len(line) <= width else line[: width - 1] + "…"


def explaining_copy(conn: psycopg.Connection) -> None:
    """kiwi_bench.explain_search_tools: search_tools as it is now (its body: kiwi_internal.search_tools,
    which public.search_tools calls), but each statement it answers with is EXPLAINed (analyze)
    and the plan returned: where the time of one call goes."""
    row = conn.execute(
        "select pg_get_functiondef('kiwi_internal.search_tools(text,text,text,int,real[],text)'::regprocedure)"
    ).fetchone()
    assert row is not None
    src = row[0].replace("FUNCTION kiwi_internal.search_tools(", "FUNCTION kiwi_bench.explain_search_tools(", 1)
    src = re.sub(r"RETURNS TABLE\(.*?\)\n", "RETURNS SETOF text\n", src, count=1, flags=re.S)
    src = src.replace(" STABLE", " VOLATILE", 1)  # EXPLAIN ANALYZE runs only in a volatile function
    src = src.replace("return query execute ", "return query execute 'explain (analyze, buffers, costs off) ' || ")
    conn.execute(src)


def explain_parts(
    url: str, role: str | None, vectors: dict[str, list[float]], model: str, slowest: str
) -> dict[str, list[str]]:
    """The plan of the statement search_tools runs for the slowest query (as the judged caller),
    and of nearest_tools' query (as the superuser)."""
    out: dict[str, list[str]] = {}
    with psycopg.connect(url, autocommit=True) as conn:  # as the superuser
        explaining_copy(conn)
        conn.execute(
            sql.SQL("grant execute on function kiwi_bench.explain_search_tools to {}").format(
                sql.Identifier(role or "authenticated")
            )
        )
        with judged_connection(url, role) as judged:
            rows = judged.execute(
                "select * from kiwi_bench.explain_search_tools(%s, null, null, 20, %s::real[], %s)",
                (slowest, vectors[slowest], model),
            ).fetchall()
        out[f"the statement search_tools runs (hybrid, as the judged caller), `{slowest}` (the slowest of the mix)"] = [
            _short(r[0]) for r in rows
        ]
        query = QUERY_MIX[0]
        conn.execute("set hnsw.iterative_scan = relaxed_order")
        conn.execute("set hnsw.ef_search = 100")
        conn.execute(NEAREST_PREPARE)
        execute = sql.SQL("execute bench_nearest({}, {}::extensions.vector, 50, 0.1)").format(
            sql.Literal(model), sql.Literal(str(vectors[query]))
        )
        out[f"nearest_tools' own query (prepared as it runs it), `{query}`"] = explain(conn, execute.as_string(conn))
    return out


def model_load_ms() -> float:
    """The first embed in a fresh process (import and load), as a CLI call pays it."""
    code = (
        "import time; t = time.perf_counter(); from runner.search import LocalWordLlama; "
        "LocalWordLlama().embed(['load']); print((time.perf_counter() - t) * 1000)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def judged_connection(url: str, role: str | None) -> psycopg.Connection:
    """The caller whose figures are judged: a signed-in member (registry_bench's), or `role`."""
    conn = connect(url, role, raw_json=True) if role else connect_signed_in(url)
    if not role:
        for name in ("json", "jsonb"):  # raw rows, as connect(raw_json=True) gives
            conn.adapters.register_loader(name, TextLoader)
    return conn


def caller_label(role: str | None) -> str:
    if role:
        return f"role {role}"
    return f"a signed-in member of `{SIGNED_IN_NAMESPACE}` (role authenticated, JWT claims)"


def measure_latency(registry: Registry, role: str | None, figures: Latency) -> None:
    """Query embedding, then search_tools hybrid and lexical, as the judged caller and as the
    superuser, interleaved, on warm connections."""
    figures.model_load_ms = model_load_ms()
    embedder = LocalWordLlama()
    embedder.embed(["load"])
    vectors: dict[str, list[float]] = {}
    for query in QUERY_MIX:
        text = parse(query).text
        vectors[query] = embedder.embed([text])[0]
        figures.query_embed[query] = [timed_ms(embedder.embed, [text]) for _ in range(EMBED_REPS)]

    model = embedder.model
    figures.caller = caller_label(role)
    with judged_connection(registry.url, role) as conn, connect(registry.url, None, raw_json=True) as su:
        for query in QUERY_MIX:
            vec = vectors[query]
            rows = conn.execute(HYBRID_Q, (query, vec, model), prepare=True).fetchall()
            if rows and rows[0][SEARCH_MODE] != "hybrid":
                raise SystemExit(f"{registry.dbname}: search_tools answered {rows[0][SEARCH_MODE]!r}, not hybrid")
            figures.first[query] = f"{rows[0][0]} ({rows[0][SEARCH_MODE - 1]})" if rows else "(none)"
            for c in (conn, su, conn, su):
                c.execute(HYBRID_Q, (query, vec, model), prepare=True).fetchall()
                c.execute(LEXICAL_Q, (query,), prepare=True).fetchall()
            figures.hybrid[query], figures.lexical[query] = [], []
            figures.hybrid_admin[query], figures.lexical_admin[query] = [], []
            for _ in range(SEARCH_REPS):
                figures.hybrid[query].append(timed_ms(fetched, conn, HYBRID_Q, (query, vec, model)))
                figures.lexical[query].append(timed_ms(fetched, conn, LEXICAL_Q, (query,)))
                figures.hybrid_admin[query].append(timed_ms(fetched, su, HYBRID_Q, (query, vec, model)))
                figures.lexical_admin[query].append(timed_ms(fetched, su, LEXICAL_Q, (query,)))
            figures.hybrid_server[query] = server_times(
                conn, "select kiwi_bench.time_hybrid(%s, %s::real[], %s, %s)", (query, vec, model, SEARCH_REPS)
            )
            figures.lexical_server[query] = server_times(
                conn, "select kiwi_bench.time_search(%s, %s)", (query, SEARCH_REPS)
            )
            figures.nearest_server[query] = server_times(
                conn, "select kiwi_bench.time_nearest(%s::real[], %s, %s)", (vec, model, SEARCH_REPS)
            )

    slowest = max(QUERY_MIX, key=lambda q: median(figures.hybrid[q]))
    figures.explain = explain_parts(registry.url, role, vectors, model, slowest)


def latency(args: argparse.Namespace) -> Latency:
    sizes = sorted(set(args.sizes) | {EMBED_SIZE})
    registries = {n: ensure_registry(n, args.admin_url, rebuild=args.rebuild, log=_log) for n in sizes}
    for registry in registries.values():
        # kiwi_bench.time_search (the lexical side) and the signed-in member, callable by the judged role
        install_helpers(registry.url)
        install_registry_helpers(registry.url, args.role or "authenticated")
    largest = registries[max(sizes)]
    figures = Latency(largest)
    run = embed_registry(registries[EMBED_SIZE], fresh=True)
    assert run is not None
    figures.embed_runs.append(run)
    for n in sizes:
        if n != EMBED_SIZE:
            other = embed_registry(registries[n], fresh=args.reembed)
            if other is not None:
                figures.embed_runs.append(other)
    _log(f"[search] measuring {largest.dbname} ({largest.tool_count:,} tools)")
    measure_latency(largest, args.role, figures)
    return figures


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def _mp(values: Sequence[float], digits: int = 2) -> str:
    return f"{median(values):.{digits}f} [{p95(values):.{digits}f}]"


def _k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def latency_section(f: Latency) -> list[str]:
    at = f"{f.registry.tool_count:,} tools ({f.registry.dbname})"
    parts = ["## A. Embedding the registry (embed_pending, as `kiwi embed`)", ""]
    parts.append(
        table(
            ["registry", "texts", "seconds", "of which the model", "texts/s", "measured"],
            [
                [
                    r.registry,
                    f"{r.texts:,}",
                    f"{r.seconds:.1f}",
                    "-" if r.model_seconds != r.model_seconds else f"{r.model_seconds:.1f}",
                    f"{r.texts / r.seconds:,.0f}",
                    "this run" if r.measured_now else f"earlier ({r.when} UTC; --reembed measures again)",
                ]
                for r in f.embed_runs
            ],
        )
    )
    parts += [
        "",
        "The rest of each time is the registry's: pending_search_texts and store_search_embeddings "
        "(256 vectors a call, as jsonb).",
        "",
        "## A. Query embedding and search_tools at " + at,
        "",
        f"Model load (first embed in a fresh process, import included): {f.model_load_ms:.0f} ms. "
        "Per query: query embedding "
        f"({EMBED_REPS} runs, in-process), then search_tools client round trips ({SEARCH_REPS} runs each, "
        f"hybrid and lexical as {f.caller} and as the superuser (su), the four interleaved, prepared) "
        "and server-side times (plpgsql loop, as the first caller) of hybrid, "
        "lexical and kiwi_internal.nearest_tools alone (ms, median [p95]):",
        "",
        table(
            [
                "query",
                "embed",
                "hybrid",
                "lexical",
                "hybrid su",
                "lexical su",
                "hybrid srv",
                "lexical srv",
                "nearest srv",
                "first (hybrid)",
            ],
            [
                [
                    f"`{q}`",
                    f"{median(f.query_embed[q]):.3f}",
                    _mp(f.hybrid[q]),
                    _mp(f.lexical[q]),
                    _mp(f.hybrid_admin[q]),
                    _mp(f.lexical_admin[q]),
                    f"{median(f.hybrid_server[q]):.2f}",
                    f"{median(f.lexical_server[q]):.2f}",
                    f"{median(f.nearest_server[q]):.2f}",
                    f.first[q],
                ]
                for q in QUERY_MIX
            ],
        ),
        "",
    ]
    for title, plan in f.explain.items():
        parts += [f"EXPLAIN (analyze, buffers) {title}:", "", "```", *plan, "```", ""]
    return parts


def verdicts(lat: Latency | None, rel: relevance_figures.Relevance | None) -> list[Verdict]:
    out: list[Verdict] = []
    if lat is not None:
        at = f"@{_k(lat.registry.n_tools)}"
        for run in lat.embed_runs:
            size = run.registry.removeprefix("kiwi_bench_")
            ten_k = size == str(EMBED_SIZE)
            label = f"embed + store {run.texts:,} texts ({_k(int(size))} registry)"
            out.append(Verdict(label, run.seconds, "s", "<=", 60 * run.texts / EMBED_SIZE, judged=ten_k))
        out += [
            Verdict(
                "query embedding in-process, median over the mix", median(lat.pooled("query_embed")), "ms", "<=", 5
            ),
            Verdict(
                f"search_tools hybrid, signed in, client median over the mix {at}",
                median(lat.pooled("hybrid")),
                "ms",
                "<=",
                15,
            ),
            Verdict(
                f"search_tools lexical only, signed in, same run {at}", median(lat.pooled("lexical")), "ms", "<=", 15
            ),
            Verdict(f"   hybrid p95, signed in {at}", p95(lat.pooled("hybrid")), "ms", "<=", 15, judged=False),
            Verdict(
                f"   hybrid as the superuser {at}", median(lat.pooled("hybrid_admin")), "ms", "<=", 15, judged=False
            ),
            Verdict(
                f"   lexical as the superuser {at}", median(lat.pooled("lexical_admin")), "ms", "<=", 15, judged=False
            ),
        ]
    if rel is not None:
        out += relevance_figures.verdicts(rel)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", type=parse_sizes, help="registry sizes (%(default)s)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the registries and the relevance database")
    parser.add_argument("--reembed", action="store_true", help="embed the largest registries anew (minutes at 100k)")
    parser.add_argument("--parts", default="latency,relevance", help="what to measure (%(default)s)")
    parser.add_argument("--relevance-db", default=None, help="measure this relevance database as it is (a copy)")
    parser.add_argument(
        "--role", default=None, help="judge this role's searches (e.g. anon); default: a signed-in member"
    )
    parser.add_argument(
        "--admin-url", default=os.environ.get("KIWI_BENCH_ADMIN_URL", DEFAULT_ADMIN_URL), help="cluster superuser URL"
    )
    args = parser.parse_args()
    parts = set(re.split(r"[,\s]+", args.parts))
    commit = git_commit()
    command = ".venv/bin/python bench/search_bench.py --sizes " + ",".join(str(n) for n in args.sizes)
    command += f" --parts {args.parts}" if parts != {"latency", "relevance"} else ""
    command += f" --relevance-db {args.relevance_db}" if args.relevance_db else ""
    command += f" --role {args.role}" if args.role else ""

    lat = latency(args) if "latency" in parts else None
    rel = (
        relevance_figures.measure(args.admin_url, args.relevance_db, args.rebuild, _log)
        if "relevance" in parts
        else None
    )

    text = ["# Kiwi search benchmark", "", f"Reproduce: `{command}`", ""]
    text += environment(args.admin_url, commit, [lat.registry] if lat else [])
    text += [f"- caller judged: {caller_label(args.role)}; the connecting superuser's figures beside", ""]
    text += latency_section(lat) if lat else []
    text += relevance_figures.section(rel) if rel else []
    results = verdicts(lat, rel)
    text += summary(results)
    report = "\n".join(text)
    print(report)
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_FILE.write_text(report + "\n")
    print(f"(written to {RESULTS_FILE.relative_to(ROOT)})")
    return 0 if all(v.passed for v in results if v.judged) else 1


if __name__ == "__main__":
    sys.exit(main())
