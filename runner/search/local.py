"""Searching the local spaces (.ai/tools, ~/.ai/tools) the way the registry searches.

A local space holds a handful of tools, so every tool.yaml is read (and remembered while it
is unchanged) and ranked here, in Python, with the same idea as public.search_tools: a tool
is found when it has ANY of the query's words (English stop words dropped, words stemmed,
each stem a prefix; a word no local tool has is replaced by its close spellings, trigram
similarity >= 0.3), ranked with search_tools' weights (runner/core/fusion.py) by the exact id
(100), PER_WORD per word it has (PER_WORD_FUSED when fused with meaning), how much of its id
and name the words cover (0..1), and TERMS x the best field each word is in (FIELDS: id and
name, tags, description and category, parameters; over the query's words, 0..1). The words
weigh alike here (a space's few tools say nothing of how rare a word is), but for a long
request they weigh less in a long tool, more the more often the tool says them, and a word
said again weighs more, as in the registry (fusion.length_factor, fusion.tf_factor,
fusion.query_weight). With the query's
embedding, the tools' texts are embedded too (by the same embedder, remembered by text) and a
tool whose cosine similarity reaches MIN_SIMILARITY is found by meaning; the two lists are
then fused as the registry fuses its own (runner/core/fusion.py: search_weights' weights and
scaling), so local rows can be listed among the registry's.

The project space shadows the user space (as `kiwi run` resolves). A tool.yaml that cannot
be read is skipped with a warning, never an exception.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.fusion import FIELDS, PER_WORD, PER_WORD_FUSED, TERMS, fuse, length_factor, query_weight, tf_factor
from ..core.refs import ToolRef, normalize_ref, tool_name
from ..registry.spaces import MANIFEST_NAME, bare_scripts, tool_dirs
from .query import Query

if TYPE_CHECKING:
    from .embedders import Embedder

# cosine similarity for a match by meaning: with the bundled model a paraphrase scores about
# 0.25-0.3 ("say hi" -> a greeting tool), the same words 0.5-0.9, unrelated texts mostly below
# 0.15. A little above search_tools' 0.2: a space's few tools each take a top place in their own
# lists, so a weak match would otherwise sit among the registry's best.
MIN_SIMILARITY = 0.25
EXACT_ID = 100.0
TYPO_SIMILARITY = 0.3
LEXICAL = "lexical: no query embedding given"  # search_tools' words
LISTING = "listing: the local spaces' tools"

# PostgreSQL's english.stop, which search_tools drops through to_tsvector('english', ...)
_STOP = """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
    her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor not only own same
    so than too very s t can will just don should now"""
STOP_WORDS = frozenset(_STOP.split())


@dataclass(frozen=True)
class LocalEntry:
    """One tool of a local space, its manifest read."""

    ref: str
    space: str
    path: Path
    manifest: dict[str, Any]

    def row(self) -> dict[str, Any]:
        """The tool as a search_tools row, marked as local (source, path)."""
        m = self.manifest
        named = ToolRef.of_manifest(m) or ToolRef("public", self.ref)
        executor = m.get("executor")
        return {
            "tool_id": self.ref,
            "namespace": named.namespace,
            "name": str(m.get("name") or named.tool_id),
            "tool_type": _text(m.get("tool_type")),
            "category": _text(m.get("category")),
            "description": _text(m.get("description")),
            "executor_id": normalize_ref(executor) if isinstance(executor, str) else None,
            "latest_version": _text(m.get("version")),
            "source": f"local:{self.space}",
            "path": str(self.path),
        }

    def search_text(self) -> str:
        """What is embedded, as kiwi_internal.tool_search_text writes a registry tool's: its id
        and name as words, description, tags, parameter names."""
        m = self.manifest
        name, tool_id = str(m.get("name") or ""), tool_name(self.ref)
        tags = " ".join(str(t) for t in m["tags"]) if isinstance(m.get("tags"), list) else ""
        parts = (
            search_words_of(tool_id) + ("" if name.lower() in ("", tool_id.lower()) else " " + search_words_of(name)),
            (_text(m.get("description")) or "").strip().rstrip("."),
            search_words_of(tags),
            search_words_of(" ".join(n for n, _ in _parameters(m.get("parameters")))),
        )
        return " ".join(". ".join(p.strip() for p in parts if p.strip()).split())


@dataclass
class Listing:
    """What the spaces hold: their tools (a ref once, the project's first) and the warnings
    of what was skipped."""

    entries: list[LocalEntry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# path -> (mtime_ns, size, manifest or None, problem or None)
_manifests: dict[Path, tuple[int, int, dict[str, Any] | None, str | None]] = {}


def list_tools(spaces: Iterable[tuple[str, Path]], query: Query | None = None) -> Listing:
    """Every tool of `spaces` (resolution order) that `query`'s local: modifier admits."""
    listing = Listing()
    seen: dict[str, LocalEntry] = {}
    for space, root in spaces:
        if (query is not None and not query.wants_space(space)) or not root.is_dir():
            continue
        for folder in tool_dirs(root):
            manifest, problem = _read(folder / MANIFEST_NAME)
            named = ToolRef.of_manifest(manifest) if manifest is not None else None
            if named is None:
                listing.warnings.append(f"skipping {folder / MANIFEST_NAME}: {problem or 'has no tool_id (a string)'}")
                continue
            _add(listing, seen, LocalEntry(named.ref, space, folder, manifest or {}))
        for script in bare_scripts(root):  # a .py or .sh with no tool.yaml (core/script_tools.py)
            from ..core.script_tools import load_bare  # PyYAML (tool_dir): only when a space has one
            from ..core.tool_dir import ToolDirError

            try:
                manifest = load_bare(script).manifest
            except ToolDirError as e:
                listing.warnings.append(f"skipping {script}: {e}")
                continue
            named = ToolRef.of_manifest(manifest)
            if named is not None:
                _add(listing, seen, LocalEntry(named.ref, space, script, manifest))
    return listing


def _add(listing: Listing, seen: dict[str, LocalEntry], entry: LocalEntry) -> None:
    """List `entry` unless its ref is listed already: the project space's shadows the user
    space's, and two of one ref in one space is a warning."""
    first = seen.get(entry.ref)
    if first is None:
        seen[entry.ref] = entry
        listing.entries.append(entry)
    elif first.space == entry.space:
        listing.warnings.append(
            f'the {entry.space} space holds two tools with tool_id "{entry.ref}": {first.path} is listed, '
            f"{entry.path} is not"
        )


def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A tool.yaml's manifest, or why it cannot be read; parsed once while unchanged."""
    import yaml

    from ..core.yaml_safe import YamlTooLarge, load_yaml

    try:
        stat = path.stat()
        cached = _manifests.get(path)
        if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
            return cached[2], cached[3]
        raw = path.read_bytes()
    except OSError as e:
        return None, str(e.strerror or e)
    manifest: dict[str, Any] | None = None
    problem: str | None = None
    try:
        loaded = load_yaml(raw)
        if isinstance(loaded, dict):
            manifest = loaded
        else:
            problem = "not a mapping"
    except UnicodeDecodeError:
        problem = "not UTF-8 text"
    except YamlTooLarge as e:
        problem = str(e)
    except yaml.MarkedYAMLError as e:
        where = f" (line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1})" if e.problem_mark else ""
        problem = f"not valid YAML: {e.problem or e.context or 'cannot parse'}{where}"
    except yaml.YAMLError as e:
        problem = "not valid YAML: " + " ".join(str(e).split())
    if len(_manifests) >= 4096:
        _manifests.clear()
    _manifests[path] = (stat.st_mtime_ns, stat.st_size, manifest, problem)
    return manifest, problem


def admits(row: dict[str, Any], manifest: dict[str, Any], query: Query) -> bool:
    """The modifiers, as search_tools applies them (type:, category:, mcp:, namespace:)."""
    executor = row["executor_id"] or ""
    if query.tool_type and not (row["tool_type"] == query.tool_type or executor in _and(query.tool_type, "_runtime")):
        return False
    kinds = {str(manifest.get(k) or "").lower() for k in ("category", "subcategory")}
    if query.category and query.category not in kinds:
        return False
    if query.mcp and not (
        row["tool_type"] == "mcp_tool"
        and (
            query.mcp == "*"
            or executor in _and(query.mcp, "_mcp")
            or ("/" not in query.mcp and tool_name(executor) in _and(query.mcp, "_mcp"))
        )
    ):
        return False
    return not query.namespace or row["namespace"] == query.namespace


def _and(name: str, suffix: str) -> tuple[str, str]:
    return name, name + suffix


# -- words -------------------------------------------------------------------------------------


def search_words_of(text: str) -> str:
    """kiwi_internal.search_words_of: camelCase split, anything not a letter or digit a space, lower case."""
    return re.sub(r"[\W_]+", " ", re.sub(r"([a-z])([A-Z])", r"\1 \2", text)).lower()


def words_of(text: str) -> list[str]:
    return search_words_of(text).split()


def stem(word: str) -> str:
    """A light English stemmer (the common inflections Porter's removes): `creating`,
    `created`, `creation` and `create` are `creat`; `queries` and `query` are `queri`. It
    need not equal PostgreSQL's: the query and the tools are stemmed alike, and a query
    stem matches as a prefix."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith(("sses", "ies")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and re.search("[aeiouy]", w[: -len(suffix)]) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                w += "e"
            elif len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1] not in "aeiou":
                w = w[:-1]
            break
    if w.endswith("y") and len(w) > 3 and w[-2] not in "aeiou":
        w = w[:-1] + "i"
    for suffix, replacement in (("ational", "ate"), ("ization", "ize"), ("ation", "ate"), ("ness", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)] + replacement
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's similarity: shared trigrams of the padded words over all of them."""
    ta, tb = _trigrams(a), _trigrams(b)
    shared = len(ta & tb)
    return shared / (len(ta) + len(tb) - shared) if ta or tb else 0.0


def _trigrams(word: str) -> set[str]:
    padded = f"  {word} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


@dataclass(frozen=True)
class _Term:
    """One query word: its stem as a prefix, or (a typo) the exact stems of its close spellings."""

    stems: tuple[str, ...]
    names: tuple[str, ...]  # the word as written (a prefix), or its close spellings (exact)
    prefix: bool
    weight: float = 1.0  # BM25's query frequency factor: more when the request says it again

    def in_stems(self, stems: set[str]) -> bool:
        if self.prefix:
            return any(s.startswith(p) for s in stems for p in self.stems)
        return any(p in stems for p in self.stems)

    def times_in(self, said: Counter[str]) -> int:
        """How often a tool says this word: every occurrence of a stem it matches."""
        return sum(n for s, n in said.items() if self.in_stems({s}))

    def in_names(self, names: set[str]) -> bool:
        if self.prefix:
            return any(n.startswith(p) for n in names for p in self.names)
        return any(p in names for p in self.names)


@dataclass(frozen=True)
class _Fields:
    """A tool's words by weight (stemmed) and its id and name's words (as written)."""

    stems: tuple[set[str], ...]
    names: set[str]
    words: set[str]  # every word as written, for reading a misspelt query word
    said: Counter[str]  # each stem by how often the tool says it, in any field (BM25's term frequency)

    @classmethod
    def of(cls, entry: LocalEntry) -> _Fields:
        m = entry.manifest
        tags = " ".join(str(t) for t in m["tags"]) if isinstance(m.get("tags"), list) else ""
        texts = (
            f"{tool_name(entry.ref)} {m.get('name') or ''}",
            tags,
            f"{_text(m.get('description')) or ''} {m.get('category') or ''} {m.get('subcategory') or ''}",
            " ".join(f"{name} {desc}" for name, desc in _parameters(m.get("parameters"))),
        )
        words = [[w for w in words_of(t) if w not in STOP_WORDS] for t in texts]
        stems = [[stem(w) for w in ws] for ws in words]
        said = Counter(s for ss in stems for s in ss)
        return cls(tuple(set(ss) for ss in stems), set(words_of(texts[0])), set().union(*words), said)

    @property
    def vocabulary(self) -> set[str]:
        return set().union(*self.stems)


def _terms(text: str, fields: Sequence[_Fields]) -> list[_Term]:
    """The query's terms; a word (4+ letters) no tool has is read as its close spellings."""
    vocabulary = set().union(*(f.vocabulary for f in fields)) if fields else set()
    spelled = set().union(*(f.words for f in fields)) if fields else set()
    said = Counter(w for w in words_of(text) if w not in STOP_WORDS)
    by_root: dict[str, tuple[str, int]] = {}  # a word said again, or two of one stem: one term
    for word, times in said.items():
        root = stem(word)
        first, before = by_root.get(root, (word, 0))
        by_root[root] = (first, before + times)
    terms: list[_Term] = []
    for root, (word, times) in by_root.items():
        weight = query_weight(times)
        if len(word) < 4 or any(v.startswith(root) for v in vocabulary):
            terms.append(_Term((root,), (word,), prefix=True, weight=weight))
            continue
        close = sorted(((trigram_similarity(word, w), w) for w in spelled), key=lambda sw: (-sw[0], sw[1]))[:2]
        fixes = tuple(w for score, w in close if score >= TYPO_SIMILARITY)
        if fixes:
            terms.append(_Term(tuple({stem(w) for w in fixes}), fixes, prefix=False, weight=weight))
    return terms


def _lexical(entry: LocalEntry, fields: _Fields, terms: Sequence[_Term], text: str, per_word: float) -> float | None:
    """The registry's lexical rank of one tool, None when it has none of the words (nor the id)."""
    exact = text.strip() in (entry.ref, tool_name(entry.ref)) and bool(text.strip())
    had = [t for t in terms if any(t.in_stems(s) for s in fields.stems)]
    if not had and not exact:
        return None
    named = sum(t.in_names(fields.names) for t in had)
    total = sum(t.weight for t in terms) or 1.0
    size = len(fields.vocabulary)
    # words counted, a repeated one more, and in a long request one the tool says often more
    count = sum(t.weight * tf_factor(t.times_in(fields.said), size, len(terms)) for t in had) * len(terms) / total
    weighted = sum(t.weight * max(w for w, s in zip(FIELDS, fields.stems, strict=True) if t.in_stems(s)) for t in had)
    words = (per_word * count + TERMS * weighted / total) * length_factor(size, len(terms))
    return EXACT_ID * exact + words + named / max(len(fields.names), 1)


# -- ranking -----------------------------------------------------------------------------------


# (model, sha256 of text) -> vector: a tool's text is embedded once per process while unchanged
_vectors: dict[tuple[str, str], list[float]] = {}


async def tool_vectors(embedder: Embedder, entries: Sequence[LocalEntry]) -> list[list[float]]:
    """Each entry's search text embedded (those not remembered, in one batch, off the event loop)."""
    keys = [(embedder.model, hashlib.sha256(e.search_text().encode()).hexdigest()) for e in entries]
    missing = {k: e.search_text() for k, e in zip(keys, entries, strict=True) if k not in _vectors}
    if missing:
        vectors = await asyncio.to_thread(embedder.embed, list(missing.values()))
        if len(vectors) != len(missing):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(missing)} texts")
        if len(_vectors) + len(missing) > 8192:
            _vectors.clear()
        _vectors.update(zip(missing, (list(v) for v in vectors), strict=True))
    return [_vectors[k] for k in keys]


def rank(
    entries: Sequence[LocalEntry],
    query: Query,
    *,
    query_vector: Sequence[float] | None = None,
    vectors: Sequence[Sequence[float]] | None = None,
    fused: bool | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The entries the query finds, best first, as search_tools rows (rank, matched_by,
    search_mode) marked local. With `query_vector` and the entries' `vectors`, meaning counts
    too. `fused` (default: whether there are vectors) puts rank on the registry's hybrid
    scale (score fusion); else on its lexical scale, where a tool found by meaning
    alone counts as PER_WORD x its similarity (less than one word)."""
    semantic = query_vector is not None and vectors is not None
    fused = semantic if fused is None else fused
    candidates = []
    for i, entry in enumerate(entries):
        row = entry.row()
        if admits(row, entry.manifest, query):
            candidates.append((i, entry, row))
    if not query.text.strip():  # a listing: the local spaces' order
        return [{**row, "rank": 0.0, "matched_by": None, "search_mode": LISTING} for _, _, row in candidates][:limit]
    fields = [_Fields.of(e) for _, e, _ in candidates]
    terms = _terms(query.text, fields)
    per_word = PER_WORD_FUSED if fused else PER_WORD
    lexical = [_lexical(e, f, terms, query.text, per_word) for (_, e, _), f in zip(candidates, fields, strict=True)]
    similar: list[float | None] = [None] * len(candidates)
    if query_vector is not None and vectors is not None:
        similar = [_cosine(query_vector, vectors[i]) for i, _, _ in candidates]
    found = []
    for (_, _, row), lex, sim in zip(candidates, lexical, similar, strict=True):
        meaning = sim is not None and sim >= MIN_SIMILARITY
        if lex is None and not meaning:
            continue
        exact = lex is not None and lex >= EXACT_ID
        by = "id" if exact else "meaning" if lex is None else "words+meaning" if meaning else "words"
        found.append({**row, "matched_by": by, "_lex": lex, "_sim": sim if meaning else None, "_exact": exact})
    _score(found, fused)
    mode = "hybrid" if semantic else LEXICAL
    found.sort(key=lambda r: (-r["rank"], r["tool_id"]))
    return [{k: v for k, v in r.items() if not k.startswith("_")} | {"search_mode": mode} for r in found[:limit]]


def _score(found: list[dict[str, Any]], fused: bool) -> None:
    """Set each row's rank: fused as search_tools fuses (runner/core/fusion.py, the exact id
    first), or the lexical rank plus PER_WORD x similarity for a
    match by meaning."""
    if not fused:
        for r in found:
            r["rank"] = (r["_lex"] or 0.0) + PER_WORD * (r["_sim"] or 0.0)
        return
    words = {i: r["_lex"] - EXACT_ID * r["_exact"] for i, r in enumerate(found) if r["_lex"] is not None}
    ranks = fuse(words, {i: r["_sim"] for i, r in enumerate(found) if r["_sim"] is not None})
    for i, r in enumerate(found):
        r["rank"] = EXACT_ID * r["_exact"] + ranks.get(i, 0.0)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Both are L2-normalised: the dot product."""
    return float(sum(x * y for x, y in zip(a, b, strict=False)))


def _parameters(parameters: object) -> list[tuple[str, str]]:
    """(name, description) of each parameter, in either form a manifest writes them: a list in
    its order, a JSON Schema's properties by name (as kiwi_internal.tool_search_text orders them)."""
    if isinstance(parameters, list):
        return [(str(p.get("name") or ""), str(p.get("description") or "")) for p in parameters if isinstance(p, dict)]
    if isinstance(parameters, dict) and isinstance(parameters.get("properties"), dict):
        return [
            (str(k), str(v.get("description") or "") if isinstance(v, dict) else "")
            for k, v in sorted(parameters["properties"].items())
        ]
    return []


def _text(value: object) -> str | None:
    return None if value is None else str(value)
