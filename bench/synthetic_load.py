"""Loads a synthetic catalogue into a registry database fast enough for 1M tools.

Why not the triggers: publishing derives, row by row, the search columns, the
vocabulary, the content hash and the precomputed plan of every tool, which takes about
a millisecond a tool. Here the same values are derived in bulk, in this order:

1. Python computes what is plain hashing and string work, exactly as the SQL functions
   do (checked on a sample by `synthetic.verify`): ascending uuids, `content_hash` (the
   canonical JSON of `kiwi_internal.canonical_json`), file sha256, size and media type,
   the embedding text `search_text` and its hash, `search_words_of` of the id and name,
   tags and categories, and the vocabulary words.
2. The rows stream by `COPY` straight into `tool_versions` and `tool_version_files`, one
   connection each, with triggers and foreign-key checks off
   (`session_replication_role = replica`), while the secondary indexes are dropped
   (they are rebuilt at the end, two at a time).
3. Meanwhile the tools go a chunk at a time into a small unlogged table and from there
   into `tools` with their tsvectors, on two more connections (`ChunkInserter`): the
   bodies of `tool_search_vector`, `tool_name_vector` and `tool_search_document` over the
   words Python split (so no regular expression runs in the database), the id-and-name
   vector computed once for both columns that hold it. The SQL functions the constraints
   call are pinned with `set search_path = ''`, which PostgreSQL never inlines; for the
   load only, the pin is lifted (their bodies name every object by schema, so the result
   is the same) and put back afterwards.
4. The plan cache is filled set-wise: a tool's plan is its executor's cached plan with
   the tool put on top (its link first, its config deep-merged last with the append
   marks of the chain below: `jsonb_deep_merge_all` folded one step further): the
   executors level by level from the seed's primitives up, then every other tool in one
   pass. `synthetic.verify` compares a sample with `kiwi_internal.compute_plan`, the
   per-tool path.
"""

from __future__ import annotations

import hashlib
import json
import queue
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
from psycopg.copy import QueuedLibpqWriter

Log = Callable[[str], None]

CHUNK = 20_000  # tools per COPY write
BATCH_TRIGGER = "plan_cache_batch_columns"  # 380_chain_batch.sql
INDEXED_TABLES = ("public.tools", "public.tool_versions", "public.tool_version_files", "kiwi_internal.plan_cache")
# SQL functions whose `set search_path = ''` is lifted during the load so they inline.
INLINED_FUNCTIONS = (
    "kiwi_internal.search_words_of(text)",
    "kiwi_internal.tool_search_vector(text, text, text[], text, text, text)",
    "kiwi_internal.tool_name_vector(text, text)",
    "kiwi_internal.tool_search_document(text, text, text[], text, text, text, jsonb)",
    "kiwi_internal.is_semver(text)",
    "kiwi_internal.sha256_hex(text)",
)

# --------------------------------------------------------------------------------------
# What the SQL functions compute, in Python (ASCII text, as the generator writes)
# --------------------------------------------------------------------------------------

_CAMEL = re.compile(r"([a-z])([A-Z])")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")
_SPACES = re.compile(r"[ \t\n\r\f\v]+")
MEDIA_TYPES = {
    "py": "text/x-python",
    "sh": "text/x-shellscript",
    "bash": "text/x-shellscript",
    "js": "text/javascript",
    "mjs": "text/javascript",
    "cjs": "text/javascript",
    "ts": "text/typescript",
    "json": "application/json",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "toml": "application/toml",
    "md": "text/markdown",
    "txt": "text/plain",
    "sql": "application/sql",
    "html": "text/html",
    "xml": "application/xml",
}


def words_of(text: str | None) -> str:
    """kiwi_internal.search_words_of. (Text without capitals has no camelCase to split:
    most of the generator's is lower case, and skipping that pass halves the cost.)"""
    text = text or ""
    if not text.islower():
        text = _CAMEL.sub(r"\1 \2", text)
    return _NON_ALNUM.sub(" ", text).lower()


def guess_media_type(path: str) -> str:
    """kiwi_internal.guess_media_type."""
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return MEDIA_TYPES.get(ext, "text/plain")


def canonical_json(value: Any) -> str:
    """kiwi_internal.canonical_json: keys in code-point order, no spaces, integers bare."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(canonical_manifest: str, files: list[tuple[str, str]]) -> str:
    """kiwi_internal.content_hash of a manifest (its canonical JSON) and (path, sha256) pairs."""
    listing = "".join(f"{p}\t{s}\n" for p, s in sorted(files))
    text = f"kiwi-content-v1\n{canonical_manifest}\n{listing}"
    return hashlib.sha256(text.encode()).hexdigest()


def _parameter_names(parameters: Any) -> str | None:
    names: list[str] = []
    if isinstance(parameters, dict) and isinstance(parameters.get("properties"), dict):
        names += sorted(parameters["properties"])  # i = 0: first, by name
    if isinstance(parameters, list):
        names += [p["name"] for p in parameters if isinstance(p, dict) and isinstance(p.get("name"), str)]
    return " ".join(names) if names else None


def search_text(tool_id: str, name: str, tags: list[str], description: str, parameters: Any) -> str:
    """kiwi_internal.tool_search_text."""
    ident = words_of(tool_id) + ("" if name.lower() == tool_id.lower() else " " + words_of(name))
    parts = [
        ident.strip(" "),
        description.strip(" ").rstrip("."),
        words_of(" ".join(tags)).strip(" "),
        words_of(_parameter_names(parameters)).strip(" "),
    ]
    return _SPACES.sub(" ", ". ".join(p for p in parts if p)).strip(" ")


# --------------------------------------------------------------------------------------
# COPY text format
# --------------------------------------------------------------------------------------


def _c(value: Any) -> str:
    """A COPY text field. (str.replace where a character occurs: several times faster than
    str.translate, the largest cost of the lines.)"""
    if value is None:
        return "\\N"
    if value is True:
        return "t"
    if value is False:
        return "f"
    s = str(value)
    if "\\" in s:
        s = s.replace("\\", "\\\\")
    if "\t" in s:
        s = s.replace("\t", "\\t")
    if "\n" in s:
        s = s.replace("\n", "\\n")
    if "\r" in s:
        s = s.replace("\r", "\\r")
    return s


def _array(items: list[str]) -> str:
    return "{" + ",".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items) + "}"


CHUNK_WORKERS = 2  # connections inserting the tools' chunks (see ChunkInserter)
STAGE_DDL = "\n".join(
    [
        "create schema if not exists kiwi_bench_load;",
        "create unlogged table kiwi_bench_load.tools_stage (id uuid, half int);",  # every tool, for the plans
        *(
            f"""create unlogged table kiwi_bench_load.tools_chunk_{w} (
  id uuid, namespace text, tool_id text, tool_type text, executor_id text, name text, description text,
  category text, subcategory text, tags text[], visibility text, is_builtin boolean, latest_version text,
  run_count bigint, download_count bigint, search_text text, search_text_hash text, parameters jsonb, half int,
  w_ident text, w_tags text, w_categories text);"""
            for w in range(CHUNK_WORKERS)
        ),
    ]
)
COPIES = {
    "versions": "copy public.tool_versions (id, tool_uuid, version, executor_id, manifest, content_hash,"
    " changelog, is_latest, admin_published) from stdin",
    "files": "copy public.tool_version_files (version_id, path, media_type, sha256, size_bytes, is_entrypoint,"
    " content_text) from stdin",
}


class Rows:
    """COPY lines of the three tables for a stream of SynthTools; gathers the namespaces
    and vocabulary words met on the way."""

    def __init__(self) -> None:
        self.namespaces: set[str] = set()
        self.words: set[str] = set()
        self.count = 0
        self.rng = random.Random()  # seeded by the OS
        self.serial = time.time_ns() // 1000 << 12  # a new range every build

    def uuid(self) -> str:
        """An ascending uuid (a serial, then random bits; as 32 hex digits, which uuid input
        takes). The primary keys of tools, versions, files and plans then grow at their
        right edge instead of everywhere: after each checkpoint (a 1M load makes dozens),
        the first change to an index page writes the whole page to the WAL again, and
        random keys touch every page. (uuid4 also read the OS's entropy, twice a tool.)"""
        self.serial += 1
        return f"{self.serial:016x}{self.rng.getrandbits(64):016x}"

    def lines(self, t: Any) -> tuple[str, str, str]:
        m = t.manifest
        tool_uuid, version_uuid = self.uuid(), self.uuid()
        body = t.file_content.encode()
        sha = hashlib.sha256(body).hexdigest()
        executor = m.get("executor")
        executor = executor.strip() if executor is not None else None
        if executor is not None and executor.startswith("public/"):
            executor = executor[7:]
        name, description = m.get("name", t.tool_id), m.get("description", "")
        tags = list(m.get("tags", []))
        text = search_text(t.tool_id, name, tags, description, m.get("parameters"))
        self.namespaces.add(t.namespace)
        # search_words_of of the id and name, the tags, the categories (see INSERT_TOOLS); together
        # the tool's vocabulary (words_of of a join is the join of words_of, but for extra spaces)
        words = (
            words_of(f"{t.tool_id} {name}"),
            words_of(" ".join(tags)),
            words_of(" ".join(c for c in (m.get("category"), m.get("subcategory")) if c is not None)),
        )
        self.words.update(w for w in " ".join(words).split(" ") if len(w) >= 3)
        half = self.count % 2
        self.count += 1
        params = m.get("parameters")
        manifest = canonical_json(m)
        tool = "\t".join(
            _c(v)
            for v in (
                tool_uuid,
                t.namespace,
                t.tool_id,
                m["tool_type"],
                executor,
                name,
                description,
                m.get("category"),
                m.get("subcategory"),
                _array(tags),
                # publish's default: public in `public`, private in anyone's own namespace
                m.get("visibility") or ("public" if t.namespace == "public" else "private"),
                bool(m.get("is_builtin", False)),
                m["version"],
                t.run_count,
                t.download_count,
                text,
                hashlib.sha256(text.encode()).hexdigest(),
                None if params is None else json.dumps(params),
                half,
                *words,
            )
        )
        version = "\t".join(
            _c(v)
            for v in (
                version_uuid,
                tool_uuid,
                m["version"],
                executor,
                manifest,
                content_hash(manifest, [(t.file_path, sha)]),
                m.get("changelog"),
                True,
                True,  # admin_published: the loader publishes as an admin would (the superuser)
            )
        )
        file = "\t".join(
            _c(v)
            for v in (
                version_uuid,
                t.file_path,
                guess_media_type(t.file_path),
                sha,
                len(body),
                m.get("entrypoint", t.file_path) == t.file_path,
                t.file_content,
            )
        )
        return tool, version, file


def _replica(conn: psycopg.Connection) -> None:
    conn.execute("set session_replication_role = replica")
    conn.execute("set maintenance_work_mem = '512MB'")
    conn.execute("set max_parallel_maintenance_workers = 1")
    conn.execute("set synchronous_commit = off")
    conn.execute("set work_mem = '128MB'")  # the plans' joins and sorts stay in memory


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class ChunkInserter:
    """Inserts the tools a chunk at a time while the next ones are generated: each chunk is
    COPY'd into its worker's unlogged table and inserted from there with its search
    columns, on CHUNK_WORKERS connections. The tsvectors are most of what a tool costs,
    and generating in Python leaves the database a core partly idle."""

    def __init__(self, url: str) -> None:
        self.queue: queue.Queue[bytes | None] = queue.Queue(maxsize=2 * CHUNK_WORKERS)
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._work, args=(url, w)) for w in range(CHUNK_WORKERS)]
        for th in self.threads:
            th.start()

    def _work(self, url: str, worker: int) -> None:
        table = f"kiwi_bench_load.tools_chunk_{worker}"
        try:
            with psycopg.connect(url) as conn:
                _replica(conn)
                while (data := self.queue.get()) is not None:
                    conn.execute(f"truncate {table}")
                    with conn.cursor().copy(f"copy {table} from stdin") as copy:
                        copy.write(data)
                    conn.execute(INSERT_TOOLS.replace("{chunk}", table))
                    conn.execute(f"insert into kiwi_bench_load.tools_stage select id, half from {table}")
                    conn.commit()
        except BaseException as exc:  # re-raised by put() or close()
            self.errors.append(exc)
            while self.queue.get() is not None:  # never leave the producer blocked
                pass

    def put(self, data: bytes) -> None:
        if self.errors:
            raise self.errors[0]
        self.queue.put(data)

    def close(self) -> None:
        for _ in self.threads:
            self.queue.put(None)
        for th in self.threads:
            th.join()
        if self.errors:
            raise self.errors[0]


def copy_rows(url: str, tools: Iterable[Any]) -> Rows:
    """Streams the version tables, one connection each, and the tools by chunks
    (ChunkInserter)."""
    rows = Rows()
    inserter = ChunkInserter(url)
    with ExitStack() as stack:
        stack.callback(inserter.close)
        conns = {k: stack.enter_context(psycopg.connect(url)) for k in COPIES}
        for conn in conns.values():
            _replica(conn)
        # a writer thread per COPY, so the three backends parse while Python generates
        copies = {
            k: stack.enter_context(cur.copy(q, writer=QueuedLibpqWriter(cur)))
            for k, q in COPIES.items()
            for cur in (conns[k].cursor(),)
        }
        for chunk in _chunks(tools, CHUNK):
            out: tuple[list[str], list[str], list[str]] = ([], [], [])
            for t in chunk:
                for buf, line in zip(out, rows.lines(t), strict=True):
                    buf.append(line)
            inserter.put(("\n".join(out[0]) + "\n").encode())
            for key, buf in zip(COPIES, out[1:], strict=True):
                copies[key].write(("\n".join(buf) + "\n").encode())
    return rows


# --------------------------------------------------------------------------------------
# Set-wise SQL
# --------------------------------------------------------------------------------------

INSERT_TOOLS = """
insert into public.tools (id, namespace, tool_id, tool_type, executor_id, name, description, category,
                          subcategory, tags, visibility, is_builtin, latest_version, run_count,
                          download_count, search_vector, name_vector, search_document, search_text,
                          search_text_hash)
select s.id, s.namespace, s.tool_id, s.tool_type, s.executor_id, s.name, s.description, s.category,
       s.subcategory, s.tags, s.visibility, s.is_builtin, s.latest_version, s.run_count, s.download_count,
       setweight(n.v, 'A') || setweight(to_tsvector('simple', s.w_tags), 'B')
         || setweight(to_tsvector('simple', coalesce(s.description, '')), 'C')
         || setweight(to_tsvector('simple', s.w_categories), 'D'),
       n.v,
       setweight(to_tsvector('english', s.w_ident), 'A') || setweight(to_tsvector('english', s.w_tags), 'B')
         || setweight(to_tsvector('english', coalesce(s.description, '') || ' ' || s.w_categories), 'C')
         || setweight(to_tsvector('english', kiwi_internal.parameters_search_text(s.parameters)), 'D'),
       s.search_text, s.search_text_hash
  from {chunk} s
 cross join lateral (select to_tsvector('simple', s.w_ident) as v) n
"""

# The executors whose plans are cached, with the append marks their chain puts in force
# (jsonb_deep_merge_all's fold of append_marks, primitive first, the executor last).
EXECUTORS = """
create unlogged table kiwi_bench_load.executors as
select pc.tool_ref, pc.plan, pc.chain_tools, pc.chain_versions, pc.chain_keys, pc.restricted_ns, pc.visibility,
       pc.namespace,
       (with recursive f (i, marks) as (
          select cardinality(pc.chain_versions) + 1, null::jsonb
          union all
          select f.i - 1, kiwi_internal.append_marks(
                   (select v.manifest -> 'config_schema' from public.tool_versions v
                     where v.id = pc.chain_versions[f.i - 1]), f.marks)
            from f where f.i > 1)
        select f.marks from f where f.i = 1) as marks
  from kiwi_internal.plan_cache pc
 where pc.tool_ref in (select r.ref from kiwi_bench_load.executor_refs r)
"""
# The tools that execute others (runtimes, servers, the seed's primitives): a few thousand.
EXECUTOR_REFS = """
create unlogged table kiwi_bench_load.executor_refs as
select distinct t.executor_id as ref from public.tools t where t.executor_id is not null
"""

# One level: every tool in {scope} without a plan whose executor has one (or that has none).
# The batch columns are written here from the plan's sources (the trigger that derives them
# from the plan is off meanwhile, see BATCH_TRIGGER): chain_keys as the executor's with this
# link first, element with the plan's values, entry from both; verify compares a sample with
# plan_chain_keys, plan_element and plan_entry. About 12% of the plans' time at 100k.
INSERT_PLANS = """
insert into kiwi_internal.plan_cache (tool_uuid, tool_ref, version_uuid, version, visibility, namespace,
                                      chain_tools, chain_versions, restricted_ns, plan, chain_keys, element, entry)
select t.id, t.ref, v.id, v.version, t.visibility, t.namespace,
       t.id || coalesce(e.chain_tools, '{}'), v.id || coalesce(e.chain_versions, '{}'),
       case when e.visibility = 'private' then array[e.namespace] else '{}'::text[] end
         || coalesce(e.restricted_ns, '{}'),
       jsonb_build_object(
         'tool_id', t.ref, 'version', v.version, 'tool_type', t.tool_type, 'content_hash', v.content_hash,
         'executor_id', v.executor_id,
         'primitive', case when e.tool_ref is not null then e.plan -> 'primitive'
                           when t.tool_type = 'primitive' then to_jsonb(t.ref) end,
         'chain', jsonb_build_array(jsonb_build_object('tool_id', t.ref, 'tool_type', t.tool_type,
                                                       'version', v.version, 'content_hash', v.content_hash))
                  || coalesce(e.plan -> 'chain', '[]'),
         'config', kiwi_internal.sandboxed_config(
                     coalesce(kiwi_internal.jsonb_deep_merge(e.plan -> 'config', v.manifest -> 'config', e.marks),
                              '{}'::jsonb), tr.trust),
         'allowed_variables', tr.trust -> 'allowed_variables',
         'parameters', v.parameters_schema, 'outputs', v.manifest -> 'outputs', 'manifest', v.manifest,
         'files', coalesce((select jsonb_agg(jsonb_build_object(
                                     'path', f.path, 'sha256', f.sha256, 'size_bytes', f.size_bytes,
                                     'is_entrypoint', f.is_entrypoint, 'media_type', f.media_type,
                                     'content_text', f.content_text, 'storage_key', f.storage_key) order by f.path)
                              from public.tool_version_files f where f.version_id = v.id), '[]'::jsonb),
         'deprecated', v.is_deprecated, 'deprecation_message', v.deprecation_message,
         'yanked', v.is_yanked, 'yanked_reason', v.yanked_reason),
       (t.ref || '@' || v.version) || coalesce(e.chain_keys, '{}'),
       json_build_object('tool_id', t.ref, 'tool_type', t.tool_type, 'executor_id', v.executor_id,
                         'version', v.version, 'content_hash', v.content_hash, 'manifest', v.manifest),
       kiwi_internal.plan_entry(t.ref, (t.ref || '@' || v.version) || coalesce(e.chain_keys, '{}'))
  from public.tools t
  join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
  left join kiwi_bench_load.executors e on e.tool_ref = t.executor_id
 -- what the chain's admins decided (420_plan_trust.sql), one step over the executor's plan
 cross join lateral (select kiwi_internal.plan_trust(
          case when e.tool_ref is not null then kiwi_internal.plan_trust_of(e.plan) end,
          array[v.manifest -> 'config'], array[coalesce(v.admin_published, false)],
          case when not coalesce(v.admin_published, false) then
            array(select g.variable from public.namespace_secret_grants g where g.namespace = t.namespace)
          end) as trust) tr
 where (t.executor_id is null or e.tool_ref is not null)
   and not exists (select 1 from kiwi_internal.plan_cache pc where pc.tool_uuid = t.id)
   and {scope}
"""
# First the executors, level by level (each a small join); then every other tool in one
# pass per half, their executors' plans all known (a pass reads every tool and version).
EXECUTOR_SCOPE = "t.ref in (select r.ref from kiwi_bench_load.executor_refs r)"
HALF_SCOPE = "t.id in (select s.id from kiwi_bench_load.tools_stage s where s.half = %s)"


def _in_parallel(url: str, work: list[Callable[[psycopg.Connection], Any]]) -> list[Any]:
    """Runs each callable on its own connection (replica role, one transaction), at once."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            with psycopg.connect(url) as conn:
                _replica(conn)
                results[i] = work[i](conn)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return results


def fill_plans(url: str, conn: psycopg.Connection) -> str:
    """The plan cache, executors level by level, then the rest; returns the rows per pass."""
    conn.execute(EXECUTOR_REFS)
    counts = []
    while True:
        conn.execute("drop table if exists kiwi_bench_load.executors")
        conn.execute(EXECUTORS)
        counts.append(conn.execute(INSERT_PLANS.replace("{scope}", EXECUTOR_SCOPE)).rowcount)
        if not counts[-1]:
            break
    conn.execute("drop table if exists kiwi_bench_load.executors")
    conn.execute(EXECUTORS)
    # without statistics the planner guessed 150k executors and sorted each half's 500k rows
    # (manifests included: 500 MB on disk at 1M) for a merge join; analyzed, it hashes the 30k
    # executors and the stage (one half at 1M: 27 s instead of 34)
    conn.execute("analyze kiwi_bench_load.executors, kiwi_bench_load.tools_stage")
    rest = INSERT_PLANS.replace("{scope}", HALF_SCOPE)

    def half(h: int) -> Callable[[psycopg.Connection], int]:
        return lambda conn: conn.execute(rest, (h,)).rowcount

    done = _in_parallel(url, [half(0), half(1)])
    return f"executors {'+'.join(map(str, counts[:-1]))}, then {sum(done)}"


def drop_secondary_indexes(conn: psycopg.Connection) -> list[str]:
    """Drops the indexes of the loaded tables that no constraint owns; returns their
    definitions (largest tables first) to build them again."""
    rows = conn.execute(
        """
        select i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
          from pg_index i
         where i.indrelid = any (%s::regclass[])
           and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)
         order by i.indrelid, i.indexrelid""",
        (list(INDEXED_TABLES),),
    ).fetchall()
    for name, _ in rows:
        conn.execute(f"drop index {name}")
    return [d for _, d in rows]


def build_indexes(url: str, definitions: list[str]) -> None:
    """Two builds at a time (one per core), GIN ones first (the slowest)."""
    pending = sorted(definitions, key=lambda d: " using gin " not in d)
    lock = threading.Lock()

    def worker(conn: psycopg.Connection) -> None:
        conn.commit()
        conn.autocommit = True
        while True:
            with lock:
                if not pending:
                    return
                definition = pending.pop(0)
            conn.execute(definition)

    _in_parallel(url, [worker, worker])


def set_function_pins(conn: psycopg.Connection, pinned: bool) -> None:
    for signature in INLINED_FUNCTIONS:
        action = "set search_path = ''" if pinned else "reset search_path"
        conn.execute(f"alter function {signature} {action}")
    # the batch columns' trigger: ALWAYS as the migration leaves it, else origin only, so it
    # skips the loader's replica sessions (INSERT_PLANS writes the columns itself)
    conn.execute(f"alter table kiwi_internal.plan_cache enable {'always ' if pinned else ''}trigger {BATCH_TRIGGER}")


def load(url: str, tools: Iterable[Any], log: Log) -> dict[str, float]:
    """Loads the tools into the registry at url (migrated and seeded); returns seconds
    per phase."""
    phases: dict[str, float] = {}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = now - clock
        clock = now
        log(f"[synthetic]   {name}: {phases[name]:.1f}s")

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(STAGE_DDL)
        indexes = drop_secondary_indexes(conn)
        set_function_pins(conn, pinned=False)
        try:
            phase("prepare")
            rows = copy_rows(url, tools)
            phase(f"generate {rows.count} tools, COPY, tools' search columns")
            conn.execute(
                "insert into public.namespaces (namespace, display_name, description)"
                " select n, initcap(n), 'Synthetic benchmark namespace.' from unnest(%s::text[]) n"
                " where n <> 'public' on conflict do nothing",
                (sorted(rows.namespaces),),
            )
            conn.execute(
                "insert into kiwi_internal.search_words (word) select unnest(%s::text[]) on conflict do nothing",
                (sorted(rows.words),),
            )
            # statistics for the plans' joins: without them the planner guesses at a million rows
            conn.execute("analyze public.tools, public.tool_versions, public.tool_version_files")
            levels = fill_plans(url, conn)
            phase(f"plans ({levels})")
        finally:
            set_function_pins(conn, pinned=True)
        build_indexes(url, indexes)
        phase(f"{len(indexes)} indexes")
        conn.execute("drop schema kiwi_bench_load cascade")
        # the words' counts (search's idf), which the replica sessions' inserts did not keep
        conn.execute("select kiwi_internal.recount_search_terms()")
        phase("search word counts")
        conn.execute("analyze")
        phase("analyze")
    return phases
