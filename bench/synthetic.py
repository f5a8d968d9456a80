"""Synthetic Kiwi registries for benchmarks.

`ensure_registry(n)` gives a database `kiwi_bench_<n>` in the local cluster holding the
real schema (every migration, then the seed) plus enough synthetic tools to make `n` in
all. It is rebuilt only when `n`, the migrations, the seed or this generator change, so
a benchmark run pays for a 100k registry once.

Publishing tools one by one through `publish_tool_version` costs about a millisecond
a tool, so the synthetic tools are loaded in bulk by bench/synthetic_load.py: `COPY`
straight into the version tables and a stage for `tools`, triggers and foreign-key
checks off (`session_replication_role = replica`), secondary indexes dropped and
rebuilt, every derived column computed set-wise with the registry's own functions (or,
for plain hashing and string work, in Python), and the plan cache filled level by
level from each executor's cached plan. `verify()` checks a sample against
`refresh_latest`, `manifest_problems`, the content-hash check,
`resolve_executor_chains_batch`, the search functions, the vocabulary and
`compute_plan` (the per-tool plan path), and deletes and republishes some tools through
`publish_tool_version` to prove a bulk-loaded tool indistinguishable from a published one.

The catalogue: a few synthetic runtimes chained so that most scripts resolve
script -> runtime -> runtime -> subprocess (depth 3), others run on the seed's runtimes;
api tools on http_client; MCP servers with their mcp_tools; knowledge. Ids, names, tags
and descriptions come from a vocabulary with Zipf-like word frequencies (a specific
word such as "markdown" matches about 1% of tools, a common one a few percent).

Run alone to build or check registries (1M tools take about 8 GB):
    .venv/bin/python bench/synthetic.py --sizes 1000,10000,100000,1000000 [--rebuild]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from bisect import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from synthetic_load import load

from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS_DIR = ROOT / "supabase" / "migrations"
SEED_FILE = ROOT / "supabase" / "seed.sql"
DEFAULT_ADMIN_URL = stack_database_url(login=STACK_SUPERUSER_LOGIN)

# Bump when the generated data changes shape: registries built by an older generator
# are then rebuilt instead of reused. (5: file bodies of api and MCP tools as one-line
# JSON, which the C encoder writes; indented JSON went through Python's.)
# 6: the synthetic Deno runtime is deno_sandbox_runtime: the seed has its own deno_runtime.
# 7: a tool that names no visibility is private outside `public`, as publish makes it.
# 8: executors (runtimes, MCP servers) are public: at least as visible as the tools on them.
# 9: the plan cache's entry column (the compact batch's request entry) is loaded too.)
GENERATOR_VERSION = 9
EXECUTOR_TYPES = ("runtime", "mcp_server", "primitive")
DB_PREFIX = "kiwi_bench_"

Log = Callable[[str], None]
Manifest = dict[str, Any]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def scalar(conn: psycopg.Connection, query: LiteralString | sql.Composed, params: Sequence[Any] = ()) -> Any:
    """The one value a query answers (a count, a setting); a query that answers no row is a bug."""
    row = conn.execute(query, params).fetchone()
    if row is None:
        raise LookupError(f"no row from {query!r}")
    return row[0]


# --------------------------------------------------------------------------------------
# Vocabulary. Domains weight the categories; inside a domain, nouns are drawn with a
# Zipf-like weight so that some words are common (hundreds or thousands of hits at 100k)
# and others rare (a handful), as in a real catalogue.
# --------------------------------------------------------------------------------------

DOMAINS: dict[str, tuple[float, list[str]]] = {
    "data": (
        1.6,
        [
            "csv",
            "json",
            "records",
            "table",
            "yaml",
            "spreadsheet",
            "schema",
            "xml",
            "excel",
            "parquet",
            "dataframe",
            "sqlite",
            "dataset",
            "column",
            "row",
            "pivot",
            "avro",
            "ndjson",
            "tsv",
            "protobuf",
            "arrow",
            "duckdb",
            "bigquery",
            "snowflake",
            "etl",
            "lineage",
            "catalog",
            "sample",
            "outlier",
            "histogram",
        ],
    ),
    "text": (
        1.4,
        [
            "text",
            "document",
            "pdf",
            "markdown",
            "summary",
            "translation",
            "template",
            "regex",
            "words",
            "encoding",
            "slug",
            "paragraph",
            "sentence",
            "spelling",
            "grammar",
            "docx",
            "latex",
            "rtf",
            "epub",
            "ocr",
            "keyword",
            "glossary",
            "citation",
            "footnote",
            "outline",
            "headline",
            "diffstat",
            "unicode",
            "emoji",
            "transliteration",
        ],
    ),
    "web": (
        1.2,
        [
            "url",
            "page",
            "html",
            "links",
            "scraper",
            "screenshot",
            "feed",
            "headers",
            "sitemap",
            "rss",
            "cookies",
            "browser",
            "form",
            "redirect",
            "favicon",
            "robots",
            "seo",
            "crawler",
            "dom",
            "selector",
            "iframe",
            "websocket",
            "graphql",
            "oauth",
            "cors",
            "captcha",
            "lighthouse",
            "accessibility",
            "bookmark",
            "archive",
        ],
    ),
    "devops": (
        1.1,
        [
            "logs",
            "deploy",
            "docker",
            "kubernetes",
            "metrics",
            "pipeline",
            "container",
            "release",
            "secrets",
            "terraform",
            "cron",
            "helm",
            "ansible",
            "nginx",
            "systemd",
            "uptime",
            "incident",
            "alert",
            "rollback",
            "canary",
            "runner",
            "artifact",
            "registry",
            "prometheus",
            "grafana",
            "tracing",
            "healthcheck",
            "autoscaler",
            "daemon",
            "sandbox",
        ],
    ),
    "cloud": (
        0.9,
        [
            "storage",
            "bucket",
            "s3",
            "queue",
            "lambda",
            "dns",
            "cdn",
            "blob",
            "certificate",
            "vm",
            "vpc",
            "iam",
            "billing",
            "region",
            "quota",
            "volume",
            "loadbalancer",
            "firewall",
            "subnet",
            "gateway",
            "cloudwatch",
            "pubsub",
            "kinesis",
            "dynamodb",
            "cosmosdb",
            "workers",
            "edge",
            "tenant",
            "cluster",
            "zone",
        ],
    ),
    "comms": (
        1.0,
        [
            "email",
            "message",
            "slack",
            "notification",
            "channel",
            "calendar",
            "webhook",
            "meeting",
            "sms",
            "invite",
            "inbox",
            "thread",
            "mention",
            "reminder",
            "newsletter",
            "attachment",
            "signature",
            "voicemail",
            "teams",
            "zoom",
            "telegram",
            "whatsapp",
            "mailbox",
            "digest",
            "standup",
            "agenda",
            "rsvp",
            "broadcast",
            "autoresponder",
            "unsubscribe",
        ],
    ),
    "finance": (
        0.8,
        [
            "invoice",
            "payment",
            "price",
            "currency",
            "tax",
            "receipt",
            "subscription",
            "budget",
            "ledger",
            "refund",
            "expense",
            "payroll",
            "quote",
            "discount",
            "coupon",
            "chargeback",
            "vat",
            "iban",
            "swift",
            "forecast",
            "revenue",
            "margin",
            "dividend",
            "portfolio",
            "stock",
            "crypto",
            "wallet",
            "reconciliation",
            "audit",
            "statement",
        ],
    ),
    "development": (
        1.3,
        [
            "repository",
            "issue",
            "commit",
            "test",
            "branch",
            "git",
            "diff",
            "dependency",
            "lint",
            "coverage",
            "changelog",
            "pullrequest",
            "review",
            "benchmark",
            "profiler",
            "debugger",
            "snippet",
            "refactor",
            "license",
            "semver",
            "monorepo",
            "submodule",
            "hook",
            "fixture",
            "mock",
            "stacktrace",
            "typecheck",
            "formatter",
            "bundler",
            "docs",
        ],
    ),
    "media": (
        0.7,
        [
            "image",
            "video",
            "audio",
            "thumbnail",
            "color",
            "icon",
            "transcript",
            "caption",
            "font",
            "gif",
            "svg",
            "png",
            "webp",
            "podcast",
            "playlist",
            "subtitle",
            "waveform",
            "palette",
            "watermark",
            "exif",
            "frame",
            "codec",
            "stream",
            "avatar",
            "banner",
            "sprite",
            "mp3",
            "mp4",
            "lut",
            "collage",
        ],
    ),
    "security": (
        0.6,
        [
            "password",
            "token",
            "key",
            "hash",
            "permission",
            "jwt",
            "signature",
            "vulnerability",
            "secret",
            "certificate",
            "mfa",
            "sso",
            "saml",
            "acl",
            "cve",
            "sbom",
            "malware",
            "phishing",
            "encryption",
            "keystore",
            "vault",
            "rbac",
            "session",
            "csrf",
            "xss",
            "firewall",
            "pentest",
            "compliance",
            "gdpr",
            "checksum",
        ],
    ),
    "ai": (
        1.0,
        [
            "model",
            "prompt",
            "embedding",
            "completion",
            "vector",
            "classifier",
            "chunk",
            "sentiment",
            "entities",
            "agent",
            "rag",
            "reranker",
            "tokenizer",
            "dataset",
            "finetune",
            "inference",
            "evaluation",
            "guardrail",
            "moderation",
            "persona",
            "memory",
            "transcription",
            "diffusion",
            "caption",
            "ner",
            "topic",
            "intent",
            "hallucination",
            "benchmark",
            "distillation",
        ],
    ),
    "geo": (
        0.4,
        [
            "address",
            "map",
            "weather",
            "timezone",
            "coordinates",
            "route",
            "distance",
            "country",
            "geocode",
            "postcode",
            "elevation",
            "satellite",
            "forecast",
            "tile",
            "polygon",
            "geofence",
            "isochrone",
            "transit",
            "flight",
            "airport",
        ],
    ),
    "crm": (
        0.5,
        [
            "customer",
            "contact",
            "lead",
            "deal",
            "ticket",
            "account",
            "survey",
            "pipeline",
            "opportunity",
            "churn",
            "segment",
            "campaign",
            "persona",
            "feedback",
            "nps",
            "onboarding",
            "renewal",
            "quota",
            "territory",
            "crm",
        ],
    ),
    "database": (
        0.8,
        [
            "query",
            "migration",
            "backup",
            "index",
            "postgres",
            "snapshot",
            "replica",
            "mysql",
            "mongodb",
            "redis",
            "schema",
            "vacuum",
            "partition",
            "trigger",
            "view",
            "sequence",
            "transaction",
            "deadlock",
            "cursor",
            "fixture",
        ],
    ),
}
VERBS = [
    "parse",
    "convert",
    "validate",
    "format",
    "fetch",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "summarize",
    "extract",
    "generate",
    "merge",
    "split",
    "compress",
    "resize",
    "sync",
    "export",
    "import",
    "analyze",
    "monitor",
    "scan",
    "encrypt",
    "decrypt",
    "translate",
    "render",
    "schedule",
    "send",
    "archive",
    "backup",
    "clean",
    "count",
    "compare",
    "transform",
    "upload",
    "download",
    "check",
    "notify",
    "index",
    "classify",
    "detect",
    "deduplicate",
    "normalize",
    "sort",
    "filter",
    "aggregate",
    "watch",
    "rotate",
    "sign",
    "verify",
]
QUALIFIERS = [
    "batch",
    "fast",
    "simple",
    "bulk",
    "safe",
    "smart",
    "incremental",
    "streaming",
    "local",
    "remote",
    "quick",
    "lite",
    "auto",
    "daily",
    "pro",
]
PROVIDERS = [
    "acme",
    "github",
    "gitlab",
    "stripe",
    "aws",
    "gcp",
    "azure",
    "notion",
    "jira",
    "hubspot",
    "salesforce",
    "zendesk",
    "twilio",
    "sendgrid",
    "shopify",
    "airtable",
    "dropbox",
    "figma",
    "linear",
    "sentry",
    "datadog",
    "openai",
    "cloudflare",
    "vercel",
    "supabase",
    "discord",
    "trello",
    "asana",
    "okta",
    "mailchimp",
]
NAMESPACES = [
    "acme",
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "stark",
    "wayne",
    "wonka",
    "tyrell",
    "cyberdyne",
    "soylent",
    "gringotts",
    "aperture",
    "oscorp",
    "massive",
    "vandelay",
    "dunder",
    "pied-piper",
    "monsters",
    "nakatomi",
]
FILLERS = [
    "quickly",
    "with retries",
    "for agents",
    "in one call",
    "without loading it all into memory",
    "with sensible defaults",
    "and reports what changed",
    "idempotently",
    "with a dry-run mode",
    "respecting rate limits",
    "and returns structured JSON",
    "from the command line",
]
DESCRIPTION_TEMPLATES = [
    "{Verb}s {noun} {filler}.",
    "{Verb}s {noun} and {noun2} files {filler}.",
    "{Verb}s {noun} data from {provider} {filler}; handy in {domain} workflows.",
    "A small tool that {verb}s {noun} into {noun2}, {filler}.",
    "{Verb}s every {noun} in a {noun2} {filler}, then reports the result.",
    "Helps {domain} teams {verb} {noun} with {provider}, {filler}.",
]


def _zipf_weights(count: int, exponent: float = 1.0) -> list[float]:
    """Cumulative Zipf weights (rank r weighs 1/r**exponent), ready for cum_weights=."""
    return list(accumulate(1.0 / (rank**exponent) for rank in range(1, count + 1)))


@dataclass(frozen=True)
class Runtime:
    """A synthetic runtime: layer-1 ones run on `subprocess`, layer-2 ones on a layer-1
    runtime, so a script on a layer-2 runtime has the depth-3 chain
    script -> runtime -> runtime -> subprocess."""

    tool_id: str
    executor: str
    name: str
    language: str
    extension: str
    config: dict[str, Any]


LAYER1_RUNTIMES = [
    Runtime(
        "uv_env_runtime",
        "subprocess",
        "uv environments",
        "python",
        "py",
        {
            "environment": {"key": ["uv", "{requires}"], "steps": [{"command": "uv", "args": ["venv", "{env_dir}"]}]},
            "env": {"UV_CACHE_DIR": "{cache_dir}/uv"},
        },
    ),
    Runtime(
        "nvm_env_runtime",
        "subprocess",
        "Node environments",
        "node",
        "js",
        {
            "environment": {
                "key": ["node", "{requires}"],
                "steps": [{"command": "npm", "args": ["ci", "--prefix", "{env_dir}"]}],
            }
        },
    ),
    Runtime(
        "sandbox_env_runtime",
        "subprocess",
        "Sandboxed environments",
        "sandbox",
        "sh",
        {"env": {"KIWI_SANDBOX": "network=off,read_only_root"}, "timeout": 120},
    ),
]
LAYER2_RUNTIMES = [
    Runtime(
        "python311_runtime",
        "uv_env_runtime",
        "Python 3.11",
        "python",
        "py",
        {"command": "{env_dir}/bin/python3.11", "args": ["{entrypoint}"], "env": {"PYTHONUNBUFFERED": "1"}},
    ),
    Runtime(
        "python312_runtime",
        "uv_env_runtime",
        "Python 3.12",
        "python",
        "py",
        {"command": "{env_dir}/bin/python3.12", "args": ["{entrypoint}"], "env": {"PYTHONUNBUFFERED": "1"}},
    ),
    Runtime(
        "node22_runtime",
        "nvm_env_runtime",
        "Node.js 22",
        "node",
        "js",
        {"command": "node", "args": ["{entrypoint}"], "env": {"NODE_ENV": "production"}},
    ),
    Runtime(
        "deno_sandbox_runtime",
        "sandbox_env_runtime",
        "Deno",
        "deno",
        "ts",
        {"command": "deno", "args": ["run", "--quiet", "{entrypoint}"]},
    ),
    Runtime("ruby_runtime", "sandbox_env_runtime", "Ruby", "ruby", "rb", {"command": "ruby", "args": ["{entrypoint}"]}),
    Runtime(
        "rust_script_runtime",
        "sandbox_env_runtime",
        "Rust scripts",
        "rust",
        "rs",
        {"command": "rust-script", "args": ["{entrypoint}"]},
    ),
]
LAYER2_RUNTIME_IDS = tuple(r.tool_id for r in LAYER2_RUNTIMES)
# Scripts on the seed's runtimes have depth-2 chains; `type:python` finds those on
# python_runtime.
# What each synthetic runtime adds to its executor's config contract: `requires`, as the seeded
# python_runtime and node_runtime declare it (a script's config may then name its packages).
REQUIRES_CONTRACT = {"type": "object", "properties": {"requires": {"type": "array", "items": {"type": "string"}}}}
SEED_SCRIPT_RUNTIMES = {
    "python_runtime": ("python", "py"),
    "node_runtime": ("node", "js"),
    "bash_runtime": ("bash", "sh"),
}

# Share of the synthetic (non-runtime) tools by type; mcp_tools hang off the servers.
TYPE_MIX = {"script": 0.55, "api": 0.12, "mcp_server": 0.03, "mcp_tool": 0.15, "knowledge": 0.15}
SCRIPT_ON_LAYER2 = 0.70


@dataclass
class SynthTool:
    """One tool to bulk-insert: its manifest and its single file."""

    namespace: str
    tool_id: str
    manifest: Manifest
    file_path: str
    file_content: str
    run_count: int = 0
    download_count: int = 0


@dataclass
class _Names:
    """Keeps tool ids unique within a namespace while drawing them from the vocabulary."""

    taken: set[tuple[str, str]] = field(default_factory=set)
    next_suffix: dict[tuple[str, str], int] = field(default_factory=dict)

    def free(self, namespace: str, candidate: str) -> bool:
        return (namespace, candidate) not in self.taken

    def claim(self, namespace: str, candidate: str) -> str:
        """The candidate itself when free, else candidate_2, _3 ... (a fork's name)."""
        name, key = candidate, (namespace, candidate)
        while (namespace, name) in self.taken:
            k = self.next_suffix.get(key, 2)
            self.next_suffix[key] = k + 1
            name = f"{candidate}_{k}"
        self.taken.add((namespace, name))
        return name


class Generator:
    """Draws a deterministic synthetic catalogue (same n, same tools)."""

    def __init__(self, n_tools: int, seed: int) -> None:
        self.n_tools = n_tools
        self.rng = random.Random(seed)
        self.names = _Names()
        self.domains = list(DOMAINS)
        self.domain_weights = list(accumulate(DOMAINS[d][0] for d in self.domains))
        self.noun_weights = {d: _zipf_weights(len(DOMAINS[d][1])) for d in self.domains}
        self.verb_weights = _zipf_weights(len(VERBS), 0.7)

    # -- vocabulary draws ---------------------------------------------------------------
    def _pick(self, population: list[str], cum_weights: list[float]) -> str:
        """rng.choices(population, cum_weights=cum_weights)[0], the same draw without its
        per-call overhead (a 1M catalogue makes millions of them)."""
        return population[bisect(cum_weights, self.rng.random() * cum_weights[-1], 0, len(population) - 1)]

    def _domain(self) -> str:
        return self._pick(self.domains, self.domain_weights)

    def _noun(self, domain: str) -> str:
        return self._pick(DOMAINS[domain][1], self.noun_weights[domain])

    def _verb(self) -> str:
        return self._pick(VERBS, self.verb_weights)

    def _namespace(self) -> str:
        return "public" if self.rng.random() < 0.9 else self.rng.choice(NAMESPACES)

    def _visibility(self, namespace: str) -> str | None:
        roll = self.rng.random()
        if roll < 0.03:
            return "unlisted"
        if namespace != "public" and roll < 0.23:
            return "private"
        return None  # public, the default: most manifests leave it out

    def _version(self) -> str:
        r = self.rng
        return f"{r.choice([0, 1, 1, 1, 2, 3])}.{r.randint(0, 12)}.{r.randint(0, 20)}"

    def _popularity(self) -> tuple[int, int]:
        runs = int(self.rng.paretovariate(1.2) * 10) - 10
        return runs, int(runs * self.rng.uniform(0.05, 0.5))

    def _describe(self, verb: str, noun: str, domain: str, provider: str) -> str:
        template = self.rng.choice(DESCRIPTION_TEMPLATES)
        return template.format(
            Verb=verb.capitalize(),
            verb=verb,
            noun=noun,
            noun2=self._noun(domain),
            filler=self.rng.choice(FILLERS),
            provider=provider.capitalize(),
            domain=domain,
        )

    def _identity(self, namespace: str, *, with_provider: float = 0.3) -> dict[str, Any]:
        """tool_id, name, description, category, tags: the searchable part."""
        r = self.rng
        # A taken id is redrawn a few times, each time likelier to carry a provider or a
        # qualifier, before falling back to a numeric suffix: ids stay word-like.
        for attempt in range(6):
            domain, verb = self._domain(), self._verb()
            noun = self._noun(domain)
            provider = r.choice(PROVIDERS)
            parts = [provider] if r.random() < with_provider + 0.15 * attempt else []
            parts += [verb, noun]
            if r.random() < 0.35 + 0.15 * attempt:
                parts.append(r.choice(QUALIFIERS))
            if self.names.free(namespace, "_".join(parts)):
                break
        tool_id = self.names.claim(namespace, "_".join(parts))
        tags = list(dict.fromkeys([domain, noun, verb, *r.sample(DOMAINS[domain][1], 2)]))
        if parts[0] == provider:
            tags.append(provider)
        identity: dict[str, Any] = {
            "tool_id": tool_id,
            "name": " ".join(p.capitalize() if i == 0 else p for i, p in enumerate(parts)),
            "description": self._describe(verb, noun, domain, provider),
            "category": domain,
            "tags": tags[: r.randint(3, 6)],
            "_noun": noun,
            "_verb": verb,
            "_provider": provider,
        }
        if r.random() < 0.5:
            identity["subcategory"] = noun
        return identity

    def _parameters(self, noun: str) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = [
            {
                "name": noun.replace("-", "_"),
                "type": "string",
                "required": True,
                "description": f"The {noun} to work on.",
            }
        ]
        if self.rng.random() < 0.6:
            params.append(
                {"name": "limit", "type": "integer", "default": 100, "description": "How many items at most."}
            )
        if self.rng.random() < 0.3:
            params.append(
                {
                    "name": "mode",
                    "type": "string",
                    "enum": ["fast", "thorough"],
                    "default": "fast",
                    "description": "Speed against depth.",
                }
            )
        return params

    # -- tools ----------------------------------------------------------------------------
    def _tool(
        self,
        namespace: str,
        tool_type: str,
        identity: dict[str, Any],
        executor: str | None,
        extra: Manifest,
        file_path: str,
        content: str,
    ) -> SynthTool:
        ref_id = identity["tool_id"] if namespace == "public" else f"{namespace}/{identity['tool_id']}"
        manifest: Manifest = {"tool_id": ref_id, "tool_type": tool_type}
        if executor is not None:
            manifest["executor"] = executor
        manifest["version"] = self._version()
        manifest.update({k: v for k, v in identity.items() if not k.startswith("_") and k != "tool_id"})
        visibility = self._visibility(namespace)
        if tool_type in EXECUTOR_TYPES:  # an executor is at least as visible as the tools on it
            visibility = "public"
        if visibility:
            manifest["visibility"] = visibility
        manifest.update(extra)
        runs, downloads = self._popularity()
        return SynthTool(namespace, identity["tool_id"], manifest, file_path, content, runs, downloads)

    def runtimes(self) -> list[SynthTool]:
        tools = []
        for rt in LAYER1_RUNTIMES + LAYER2_RUNTIMES:
            self.names.claim("public", rt.tool_id)
            layer = "environment" if rt.executor == "subprocess" else "interpreter"
            identity = {
                "tool_id": rt.tool_id,
                "name": rt.name,
                "description": f"Synthetic {rt.language} {layer} for benchmarks.",
                "category": "runtimes",
                "tags": ["runtime", rt.language, layer],
            }
            content = f"# {rt.name}\n\nRuns {rt.language} tools ({layer} layer).\n"
            tools.append(
                self._tool(
                    "public",
                    "runtime",
                    identity,
                    rt.executor,
                    {"config": rt.config, "config_schema": REQUIRES_CONTRACT, "is_builtin": True},
                    "README.md",
                    content,
                )
            )
        return tools

    def script(self) -> SynthTool:
        r = self.rng
        namespace = self._namespace()
        identity = self._identity(namespace)
        if r.random() < SCRIPT_ON_LAYER2:
            rt = r.choice(LAYER2_RUNTIMES)
            executor, language, ext = rt.tool_id, rt.language, rt.extension
        else:
            executor = r.choices(list(SEED_SCRIPT_RUNTIMES), [0.5, 0.27, 0.23])[0]
            language, ext = SEED_SCRIPT_RUNTIMES[executor]
        identity["tags"] = [*identity["tags"], language]
        entry = f"main.{ext}"
        config: dict[str, Any] = {"timeout": r.choice([10, 30, 60, 120])}
        if language in ("python", "node") and r.random() < 0.5:
            config["requires"] = [f"{identity['_noun']}-lib=={r.randint(1, 9)}.{r.randint(0, 9)}"]
        content = (
            f"# {identity['name']}: {identity['description']}\n"
            f"# tool {identity['tool_id']} ({language})\n"
            f"params = read_json_from_stdin()\n"
            f"print_json({{'tool': '{identity['tool_id']}', "
            f"'{identity['_verb']}': params}})\n"
        )
        return self._tool(
            namespace,
            "script",
            identity,
            executor,
            {"entrypoint": entry, "parameters": self._parameters(identity["_noun"]), "config": config},
            entry,
            content,
        )

    def api(self) -> SynthTool:
        namespace = self._namespace()
        identity = self._identity(namespace, with_provider=0.8)
        provider, noun = identity["_provider"], identity["_noun"]
        config = {
            "method": self.rng.choice(["GET", "POST", "POST", "PUT"]),
            "url": f"https://api.{provider}.example/v1/{noun}s",
            "headers": {"Accept": "application/json"},
            "auth": {"type": "bearer", "token": f"${{{provider.upper()}_TOKEN}}"},
            "response_transform": "$.data",
        }
        spec = json.dumps({"openapi": "3.1.0", "info": {"title": identity["name"]}, "paths": {f"/v1/{noun}s": {}}})
        return self._tool(
            namespace,
            "api",
            identity,
            "http_client",
            {"parameters": self._parameters(noun), "config": config},
            "openapi.json",
            spec,
        )

    def mcp_server(self) -> SynthTool:
        namespace = self._namespace()
        identity = self._identity(namespace, with_provider=1.0)
        identity["tool_id"] = self.names.claim(namespace, f"{identity['_provider']}_{identity['_noun']}_mcp")
        identity["name"] = f"{identity['_provider'].capitalize()} {identity['_noun']} MCP server"
        if self.rng.random() < 0.6:
            executor = "subprocess"
            config: dict[str, Any] = {
                "transport": "stdio",
                "command": "npx",
                "args": ["-y", f"@{identity['_provider']}/{identity['_noun']}-mcp@1.2.3"],
            }
        else:
            executor = "http_client"
            config = {
                "transport": "streamable_http",
                "url": f"https://mcp.{identity['_provider']}.example/{identity['_noun']}",
            }
        readme = f"# {identity['name']}\n\n{identity['description']}\n"
        return self._tool(namespace, "mcp_server", identity, executor, {"config": config}, "README.md", readme)

    def mcp_tool(self, server: SynthTool) -> SynthTool:
        identity = self._identity(server.namespace, with_provider=0.0)
        local = f"{identity['_verb']}_{identity['_noun']}"
        identity["tool_id"] = self.names.claim(server.namespace, f"{server.tool_id}.{local}")
        schema = {
            "type": "object",
            "properties": {identity["_noun"]: {"type": "string"}, "limit": {"type": "integer", "default": 50}},
            "required": [identity["_noun"]],
        }
        body = json.dumps({"name": local, "inputSchema": schema})
        return self._tool(
            server.namespace,
            "mcp_tool",
            identity,
            server.manifest["tool_id"],
            {"parameters": schema, "config": {"tool": local}},
            "tool.json",
            body,
        )

    def knowledge(self) -> SynthTool:
        namespace = self._namespace()
        identity = self._identity(namespace, with_provider=0.2)
        identity["name"] = f"Guide: {identity['name']}"
        text = (
            f"# {identity['name']}\n\n{identity['description']}\n\n"
            + " ".join(self.rng.choices(DOMAINS[identity["category"]][1], k=60))
            + "\n"
        )
        return self._tool(namespace, "knowledge", identity, None, {"entrypoint": "guide.md"}, "guide.md", text)

    def catalogue(self, existing: int) -> Iterator[SynthTool]:
        """Runtimes first, then enough tools of each type to reach n_tools in all, drawn
        as they are consumed (a 1M catalogue is never held in memory)."""
        yield from self.runtimes()
        remaining = max(self.n_tools - existing - len(LAYER1_RUNTIMES) - len(LAYER2_RUNTIMES), 0)
        counts = {t: int(remaining * share) for t, share in TYPE_MIX.items()}
        counts["script"] += remaining - sum(counts.values())
        if counts["mcp_tool"] and not counts["mcp_server"]:
            counts["mcp_server"], counts["mcp_tool"] = 1, counts["mcp_tool"] - 1
        servers = [self.mcp_server() for _ in range(counts["mcp_server"])]
        yield from servers
        for _ in range(counts["mcp_tool"]):
            yield self.mcp_tool(self.rng.choice(servers))
        for _ in range(counts["script"]):
            yield self.script()
        for _ in range(counts["api"]):
            yield self.api()
        for _ in range(counts["knowledge"]):
            yield self.knowledge()


# --------------------------------------------------------------------------------------
# Building a database
# --------------------------------------------------------------------------------------


def migration_files() -> list[Path]:
    return sorted(MIGRATIONS_DIR.glob("*.sql"))


def schema_hash() -> str:
    """What a built registry depends on: migrations, seed and this generator's version."""
    digest = hashlib.sha256(f"generator-v{GENERATOR_VERSION}\n".encode())
    for path in [*migration_files(), SEED_FILE]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def database_name(n_tools: int) -> str:
    return f"{DB_PREFIX}{int(n_tools)}"


def database_url(admin_url: str, dbname: str) -> str:
    return make_conninfo(admin_url, dbname=dbname)


@dataclass
class Registry:
    """A synthetic registry ready to benchmark."""

    n_tools: int
    dbname: str
    url: str
    built: bool
    build_seconds: float
    tool_count: int
    schema: str  # hash of the migrations and seed it was built from (see schema_hash)


def _marker(n_tools: int) -> str:
    return json.dumps({"kiwi_bench": True, "n": n_tools, "hash": schema_hash()}, sort_keys=True)


def _current_marker(admin: psycopg.Connection, dbname: str) -> str | None:
    row = admin.execute(
        "select shobj_description(oid, 'pg_database') from pg_database where datname = %s", (dbname,)
    ).fetchone()
    return None if row is None else (row[0] or "")


def _apply_sql_files(conn: psycopg.Connection, files: Iterable[Path]) -> None:
    """Each file in its own transaction, as the Supabase CLI applies migrations."""
    for path in files:
        with conn.transaction():
            conn.execute(path.read_text())  # plain SQL, no params


# --------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------

_VERIFY_SAMPLE = """
create temp table bench_sample on commit drop as
select t.id, t.ref from public.tools t order by md5(t.ref) limit %s
"""
_TOOL_MIRROR_COLUMNS = (
    "latest_version, executor_id, name, description, category, subcategory, tags, visibility, search_vector"
)


# Everything the registry derives for one tool, minus identities and timestamps that a
# new publish changes (and the usage counters, which publishing resets, with the quality
# score that weighs them).
_TOOL_STATE = """
select p.ref,
       to_jsonb(t) - '{id,created_at,updated_at,run_count,download_count,quality_score}'::text[] as tool,
       (select to_jsonb(v) - '{id,tool_uuid,published_at,published_by}'::text[]
          from public.tool_versions v where v.tool_uuid = t.id and v.is_latest) as version,
       (select jsonb_agg(to_jsonb(f) - '{version_id,created_at}'::text[] order by f.path)
          from public.tool_version_files f
          join public.tool_versions v on v.id = f.version_id
         where v.tool_uuid = t.id) as files,
       public.resolve_execution_plan(p.ref) as plan
       {extra}
  from bench_pick p join public.tools t on t.ref = p.ref
"""
_PLAN_CACHE_STATE = """,
       (select to_jsonb(pc) - '{tool_uuid,version_uuid,chain_tools,chain_versions,built_at}'::text[]
          from kiwi_internal.plan_cache pc where pc.tool_ref = p.ref) as cached_plan"""


def _republished_differences(conn: psycopg.Connection, k: int) -> int:
    """Deletes k leaf tools of the sample and publishes them again through
    publish_tool_version (inside the caller's rolled-back transaction), then counts the
    tools whose derived state (row, version, files, plan, cached plan) or the search
    vocabulary changed. Deferred triggers are fired before comparing."""
    conn.execute(
        """
        create temp table bench_pick on commit drop as
        select s.ref, v.manifest,
               (select jsonb_agg(jsonb_build_object('path', f.path, 'content_text', f.content_text))
                  from public.tool_version_files f where f.version_id = v.id) as files
          from bench_sample s
          join public.tools t on t.id = s.id
          join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
         where not exists (select 1 from public.tools d where d.executor_id = t.ref)
           and t.visibility = 'public'
         order by s.ref limit %s""",
        (k,),
    )
    has_cache = conn.execute("select to_regclass('kiwi_internal.plan_cache') is not null").fetchone()
    has_words = conn.execute("select to_regclass('kiwi_internal.search_words') is not null").fetchone()
    state = _TOOL_STATE.replace("{extra}", _PLAN_CACHE_STATE if has_cache and has_cache[0] else "")
    words = "select count(*) from kiwi_internal.search_words"
    words_before = conn.execute(words).fetchone() if has_words and has_words[0] else None
    conn.execute(f"create temp table bench_state_before on commit drop as {state}")
    conn.execute("delete from public.tools t using bench_pick p where t.ref = p.ref")
    conn.execute("select public.publish_tool_version(p.manifest, coalesce(p.files, '[]')) from bench_pick p")
    conn.execute("set constraints all immediate")  # plan rebuilds and hash checks, now
    different = conn.execute(f"select count(*) from (select * from bench_state_before except {state}) d").fetchone()
    words_after = conn.execute(words).fetchone() if words_before else None
    return (different[0] if different else 0) + int(words_before != words_after)


# What synthetic_load derives in bulk (in Python or set-wise SQL), each against the
# function publishing uses, on the sample; plus what must hold for every tool.
DERIVED_CHECKS = {
    "search_columns_not_recomputed": """
        select count(*) from public.tools t join bench_sample s using (id)
          join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
         where (t.search_vector, t.name_vector, t.search_document, t.search_text, t.search_text_hash)
               is distinct from (
                 kiwi_internal.tool_search_vector(t.tool_id, t.name, t.tags, t.description, t.category, t.subcategory),
                 kiwi_internal.tool_name_vector(t.tool_id, t.name),
                 kiwi_internal.tool_search_document(t.tool_id, t.name, t.tags, t.description, t.category,
                                                    t.subcategory, v.manifest -> 'parameters'),
                 kiwi_internal.tool_search_text(t.tool_id, t.name, t.tags, t.description, v.manifest -> 'parameters'),
                 kiwi_internal.sha256_hex(kiwi_internal.tool_search_text(t.tool_id, t.name, t.tags, t.description,
                                                                         v.manifest -> 'parameters')))""",
    "vocabulary_missing": """
        select count(*) from public.tools t join bench_sample s using (id)
         cross join lateral regexp_split_to_table(kiwi_internal.search_words_of(kiwi_internal.tool_vocabulary(
                 t.tool_id, t.name, t.tags, t.category, t.subcategory)), ' ') w
         where length(w) >= 3 and not exists (select 1 from kiwi_internal.search_words x where x.word = w)""",
    "cached_plan_not_computed": """
        select count(*) from bench_sample s
          join public.tool_versions v on v.tool_uuid = s.id and v.is_latest
          left join kiwi_internal.plan_cache pc on pc.tool_uuid = s.id
         cross join lateral kiwi_internal.compute_plan(v.id, true, '{}') b
         where (pc.version_uuid, pc.chain_tools, pc.chain_versions, pc.restricted_ns, pc.plan)
               is distinct from (v.id, b.chain_tools, b.chain_versions, b.restricted_ns, b.plan)""",
    "tools_without_cached_plan": """
        select count(*) from public.tools t
         where not exists (select 1 from kiwi_internal.plan_cache pc where pc.tool_uuid = t.id)""",
    "cached_batch_columns_not_derived": """
        select count(*) from bench_sample s join kiwi_internal.plan_cache pc on pc.tool_uuid = s.id
         where pc.chain_keys is distinct from kiwi_internal.plan_chain_keys(pc.plan)
            or pc.element::text is distinct from kiwi_internal.plan_element(pc.plan)::text
            or pc.entry::text is distinct from kiwi_internal.plan_entry(pc.tool_ref, pc.chain_keys)::text""",
    "batch_trigger_not_always": """
        select count(*) from pg_trigger where tgname = 'plan_cache_batch_columns' and tgenabled <> 'A'""",
    "functions_not_pinned": """
        select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'kiwi_internal' and not ('search_path=""' = any (coalesce(p.proconfig, '{}')))""",
}


def _derived_differences(conn: psycopg.Connection) -> dict[str, int]:
    return {name: scalar(conn, query) for name, query in DERIVED_CHECKS.items()}


class VerificationError(RuntimeError):
    """The synthetic data disagrees with what publishing would have produced."""


def verify(conn: psycopg.Connection, sample: int = 500) -> dict[str, int]:
    """Checks a sample of synthetic tools against the registry's own rules; raises if any
    differs. Runs in a transaction that is rolled back."""
    checks: dict[str, int] = {}
    with conn.transaction(force_rollback=True):
        conn.execute(_VERIFY_SAMPLE, (sample,))
        checks["sample"] = scalar(conn, "select count(*) from bench_sample")
        # 1. chains resolve, no errors
        row = conn.execute(
            "select count(*), count(error), count(distinct requested_tool_id), max(depth) "
            "from public.resolve_executor_chains_batch("
            "  (select array_agg(ref) from bench_sample))"
        ).fetchone()
        assert row is not None
        checks["chain_rows"], checks["chain_errors"], checks["chains"], checks["max_depth"] = row
        # 2. stored content_hash = hash of manifest and files (the commit-time check)
        checks["bad_content_hash"] = scalar(
            conn,
            """
            select count(*) from public.tool_versions v join bench_sample s on s.id = v.tool_uuid
             where v.content_hash <> kiwi_internal.content_hash(v.manifest, coalesce((
                     select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256))
                       from public.tool_version_files f where f.version_id = v.id), '[]'))
        """,
        )
        # 3. manifests and files pass publish's validation
        checks["invalid_manifests"] = scalar(
            conn,
            """
            select count(*) from public.tool_versions v join bench_sample s on s.id = v.tool_uuid
             where cardinality(kiwi_internal.manifest_problems(v.manifest)) > 0
                or cardinality(kiwi_internal.files_problems(
                     coalesce((select jsonb_agg(jsonb_build_object(
                                 'path', f.path, 'content_text', f.content_text,
                                 'sha256', f.sha256, 'is_entrypoint', f.is_entrypoint,
                                 'media_type', f.media_type))
                          from public.tool_version_files f where f.version_id = v.id), '[]'),
                     v.manifest)) > 0
        """,
        )
        # 4. the tool rows mirror their latest version exactly as refresh_latest sets them
        conn.execute(
            f"create temp table bench_before on commit drop as "
            f"select t.id, {_TOOL_MIRROR_COLUMNS} from public.tools t "
            f"join bench_sample s using (id)"
        )
        conn.execute("select kiwi_internal.refresh_latest(s.id) from bench_sample s")
        checks["tools_not_mirroring_latest"] = scalar(
            conn,
            f"select count(*) from (select t.id, {_TOOL_MIRROR_COLUMNS} "
            f"from public.tools t join bench_sample s using (id) "
            f"except select * from bench_before) d",
        )
        # 5. publishing the same manifest and file again is a no-op: publish computes the
        #    same content hash and finds the version already there
        checks["republish_not_unchanged"] = scalar(
            conn,
            """
            select count(*) from (select s.ref from bench_sample s limit 100) s
              join public.tools t on t.ref = s.ref
              join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
             where (public.publish_tool_version(v.manifest, coalesce((
                      select jsonb_agg(jsonb_build_object('path', f.path,
                                                          'content_text', f.content_text))
                        from public.tool_version_files f where f.version_id = v.id), '[]'))
                    ->> 'unchanged')::boolean is not true
        """,
        )
        # 6. exactly one latest version per tool, everywhere
        checks["tools_without_one_latest"] = scalar(
            conn,
            """
            select count(*) from public.tools t
             where (select count(*) from public.tool_versions v
                     where v.tool_uuid = t.id and v.is_latest) <> 1
        """,
        )
        # 7. what the loader derived in bulk equals the registry's own per-tool functions
        checks.update(_derived_differences(conn))
        # 8. a bulk-loaded tool is indistinguishable from a published one
        checks["differs_from_published"] = _republished_differences(conn, 40)
    problems = {
        k: v
        for k, v in checks.items()
        if k
        in (
            "chain_errors",
            "bad_content_hash",
            "invalid_manifests",
            "tools_not_mirroring_latest",
            "republish_not_unchanged",
            "tools_without_one_latest",
            "differs_from_published",
            *DERIVED_CHECKS,
        )
        and v
    }
    if problems or checks["chains"] != checks["sample"]:
        raise VerificationError(f"synthetic registry failed verification: {checks}")
    return checks


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def ensure_registry(
    n_tools: int,
    admin_url: str = DEFAULT_ADMIN_URL,
    *,
    rebuild: bool = False,
    log: Log = _stderr,
    dbname: str | None = None,
) -> Registry:
    """The registry `kiwi_bench_<n>` (or dbname), reused when its marker matches, else
    built anew."""
    if n_tools < 100:
        raise ValueError("a synthetic registry needs at least 100 tools")
    dbname = dbname or database_name(n_tools)
    url = database_url(admin_url, dbname)
    marker = _marker(n_tools)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        current = _current_marker(admin, dbname)
        if current == marker and not rebuild:
            with psycopg.connect(url) as conn:
                count = scalar(conn, "select count(*) from public.tools")
            log(f"[synthetic] {dbname}: reusing ({count} tools, migrations unchanged)")
            return Registry(n_tools, dbname, url, False, 0.0, count, json.loads(marker)["hash"])
        started = time.perf_counter()
        reason = (
            "rebuild asked"
            if current == marker
            else "new"
            if current is None
            else "no marker: an unfinished or foreign build"
            if not current
            else "migrations, seed or generator changed"
        )
        log(f"[synthetic] {dbname}: building ({reason})")
        ident = sql.Identifier(dbname)
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(ident))
        admin.execute(sql.SQL("create database {} template template0").format(ident))

    with psycopg.connect(url, autocommit=True) as conn:
        _apply_sql_files(conn, migration_files())
        _apply_sql_files(conn, [SEED_FILE])
        existing = scalar(conn, "select count(*) from public.tools")
        log(f"[synthetic] {dbname}: schema in {time.perf_counter() - started:.1f}s; loading")
        tools = Generator(n_tools, seed=20261121 + n_tools).catalogue(existing)
        load(url, tools, log)
        checks = verify(conn)
        count = scalar(conn, "select count(*) from public.tools")
        log(f"[synthetic] {dbname}: verified {checks}")

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("comment on database {} is {}").format(sql.Identifier(dbname), sql.Literal(marker)))
    seconds = time.perf_counter() - started
    log(f"[synthetic] {dbname}: built {count} tools in {seconds:.1f}s")
    return Registry(n_tools, dbname, url, True, seconds, count, json.loads(marker)["hash"])


def depth3_refs(conn: psycopg.Connection, k: int) -> list[str]:
    """k public scripts whose chain is script -> runtime -> runtime -> primitive, chosen
    deterministically (by hash) so every size and run measures comparable tools."""
    rows = conn.execute(
        "select t.ref from public.tools t "
        "where t.tool_type = 'script' and t.visibility = 'public' and t.namespace = 'public' "
        "  and t.executor_id = any (%s) order by md5(t.ref) limit %s",
        (list(LAYER2_RUNTIME_IDS), k),
    ).fetchall()
    return [r[0] for r in rows]


def parse_sizes(text: str) -> list[int]:
    sizes = [int(re.sub(r"[_\s]", "", s).lower().replace("k", "000")) for s in text.split(",")]
    return sorted(set(sizes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000",
        type=parse_sizes,
        help="comma-separated tool counts (default: %(default)s)",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild even if up to date")
    parser.add_argument(
        "--admin-url", default=DEFAULT_ADMIN_URL, help="a superuser URL on the cluster (default: the local stack)"
    )
    args = parser.parse_args()
    for n in args.sizes:
        ensure_registry(n, args.admin_url, rebuild=args.rebuild)
    return 0


if __name__ == "__main__":
    sys.exit(main())
