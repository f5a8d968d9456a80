// The registry's read-only MCP tools (search, load, resolve) over the database.
//
// Every query runs in its own transaction as the `anon` role, so the caller sees what
// an anonymous PostgREST client would: public tools only, Row Level Security applied. The
// login it connects with can become anon and no more (databaseUrl, checkLogin).
// Signed-in callers (forwarding the caller's JWT as `request.jwt.claims` and using the
// `authenticated` role) are a later step.

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import postgres from "postgres";
import { z } from "zod";

/** The local stack's port when KIWI_DB_PORT is unset, as scripts/stack and runner/config.py have it. */
export const DEFAULT_DB_PORT = "5494";

/** A configuration the function refuses to run with; said on every call until it is fixed. */
export class LoginError extends Error {}

/** The login: KIWI_EDGE_DATABASE_URL (a login that can only become anon: the migration's
 * kiwi_registry_edge), else KIWI_DATABASE_URL (Kiwi's), else the local stack's runner login on
 * KIWI_DB_PORT. Never SUPABASE_DB_URL, the superuser-level login Supabase hands every function:
 * with only that set (a deployed function not given its own login), it refuses, saying how. */
export function databaseUrl(env: (name: string) => string | undefined = (n) => Deno.env.get(n)): string {
  const given = env("KIWI_EDGE_DATABASE_URL") || env("KIWI_DATABASE_URL");
  if (given) return given;
  if (env("SUPABASE_DB_URL")) {
    throw new LoginError(
      "KIWI_EDGE_DATABASE_URL is not set, and SUPABASE_DB_URL is a superuser-level login the registry does not use; " +
        "give the function its own: alter role kiwi_registry_edge login password '...', then " +
        "supabase secrets set KIWI_EDGE_DATABASE_URL=postgresql://kiwi_registry_edge...",
    );
  }
  const port = env("KIWI_DB_PORT") || DEFAULT_DB_PORT;
  return `postgresql://kiwi_runner:kiwi_runner@127.0.0.1:${port}/postgres`;
}

/** Refuses a login that is a superuser or bypasses Row Level Security: the function acts as
 * anon, and a login that could do more must not be the one it holds. */
export function checkLogin(row: { rolsuper: boolean; rolbypassrls: boolean; rolname: string }): void {
  if (row.rolsuper || row.rolbypassrls) {
    throw new LoginError(
      `the registry's database login "${row.rolname}" is a superuser or bypasses RLS; ` +
        "use a login that can only become anon (kiwi_registry_edge) in KIWI_EDGE_DATABASE_URL",
    );
  }
}

type Sql = postgres.Sql<Record<string, unknown>>;
type Tx = postgres.TransactionSql<Record<string, unknown>>;

let pool: Sql | undefined;
let checked: Promise<void> | undefined;

/** One small pool per isolate, opened on first use. `prepare: false` keeps it usable
 * behind Supabase's transaction-mode pooler. */
function sql(): Sql {
  pool ??= postgres(databaseUrl(), {
    max: 4,
    prepare: false,
    idle_timeout: 20,
    connect_timeout: 10,
    onnotice: () => {},
    connection: { application_name: "kiwi-registry-edge" },
  });
  return pool;
}

/** The login, checked once per isolate (checkLogin); a refusal stands, a failure to connect is retried. */
function loginChecked(): Promise<void> {
  checked ??= (async () => {
    const [row] =
      await sql()`select rolname, rolsuper, rolbypassrls from pg_catalog.pg_roles where rolname = current_user`;
    checkLogin(row as { rolsuper: boolean; rolbypassrls: boolean; rolname: string });
  })().catch((e) => {
    if (!(e instanceof LoginError)) checked = undefined;
    throw e;
  });
  return checked;
}

/** Runs `fn` in a transaction as `anon` (the public, read-only view). */
async function asAnon<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
  await loginChecked();
  return await sql().begin(async (tx) => {
    await tx`set local role anon`;
    // What PostgREST sets for an anonymous request; also clears anything left on a pooled session.
    await tx`select set_config('request.jwt.claims', '{"role":"anon"}', true)`;
    await tx`set transaction read only`;
    return await fn(tx);
  }) as Promise<T>;
}

/** A failure the caller should read: becomes a tool result with isError. */
export class ToolError extends Error {}

/** `public/x` and ` x ` mean `x`; `x@1.2.0` names a version (an explicit `version` wins). */
export function splitRef(toolId: string, version?: string): { ref: string; version: string | null } {
  let ref = toolId.trim();
  let ver = version?.trim() || null;
  const at = ref.lastIndexOf("@");
  if (at > 0) {
    ver ??= ref.slice(at + 1);
    ref = ref.slice(0, at);
  }
  if (ref.startsWith("public/")) ref = ref.slice("public/".length);
  if (!ref) throw new ToolError("tool_id is empty; give a tool_id such as 'hello_world' or 'namespace/tool_id'");
  return { ref, version: ver };
}

export interface Signature {
  key_fingerprint: string;
  public_key: string;
  signature: string;
  content_hash: string;
  signed_at: string;
}

/** What the endpoint can say about signatures: it does not know the caller's trusted keys,
 * so it reports signed/unsigned and the keys' fingerprints; trust is the client's decision. */
export function signatureState(signatures: Signature[]) {
  return {
    state: signatures.length > 0 ? "signed" : "unsigned",
    key_fingerprints: signatures.map((s) => s.key_fingerprint),
    signatures,
  };
}

// --- the three tools ----------------------------------------------------------------

export async function search(args: { query: string; tool_type?: string; category?: string; limit?: number }) {
  const limit = args.limit ?? 20;
  // No query embedding here (the model runs in Kiwi's runner): search_tools answers by words.
  const rows = await asAnon((tx) =>
    tx`select tool_id, namespace, name, tool_type, category, description, executor_id, latest_version, rank,
              matched_by, search_mode
         from public.search_tools(${args.query}, ${args.tool_type ?? null}, ${args.category ?? null}, ${limit}::int)`
  );
  return searchAnswer(args.query, rows);
}

/** search_tools' rows as the answer: each item says how it matched (matched_by: id or words;
 * null in a listing), and the answer once how it was ranked (search_mode, the same on every
 * row: "lexical: <why>" or "listing: ..."; null when nothing matched). */
export function searchAnswer(query: string, rows: Record<string, unknown>[]) {
  const items = rows.map(({ search_mode: _, ...r }) => ({ ...r, rank: r.rank === null ? null : Number(r.rank) }));
  const mode = rows.length > 0 ? (rows[0].search_mode as string | null) ?? null : null;
  return { query, count: items.length, search_mode: mode, items };
}

export async function load(args: { tool_id: string; version?: string }) {
  const { ref, version } = splitRef(args.tool_id, args.version);
  return await asAnon(async (tx) => {
    // By exact reference, as every client reads: a public or unlisted tool loads here as it
    // resolves (unlisted tools are never listed, always loadable by name); a private one is
    // "not found" (tool_version_source raises PT404 naming it, with a hint).
    const [{ src }] = await tx`select public.tool_version_source(${ref}, ${version}::text) as src`;
    const [attested] = await tx`
      select signatures from public.resolve_chain_attestations(${ref}, ${src.version as string}) where depth = 0`;
    return {
      tool_id: src.tool_id,
      tool_type: src.tool_type,
      version: src.version,
      is_latest: src.is_latest,
      is_deprecated: src.is_deprecated,
      is_yanked: src.is_yanked,
      content_hash: src.content_hash,
      manifest: src.manifest,
      manifest_yaml: src.manifest_yaml,
      files: (src.files as Record<string, unknown>[]).map(({ storage_key: _, ...f }) => ({
        ...f,
        size_bytes: Number(f.size_bytes),
      })),
      signature: signatureState((attested?.signatures ?? []) as unknown as Signature[]),
    };
  });
}

export async function resolve(args: { tool_id: string; include_manifest?: boolean }) {
  const { ref } = splitRef(args.tool_id);
  const rows = await asAnon((tx) =>
    tx`select depth, tool_id, tool_type, executor_id, version, content_hash, manifest
         from public.resolve_executor_chain(${ref}) order by depth`
  );
  const chain = rows.map(({ manifest, ...r }) => (args.include_manifest ? { ...r, manifest } : r));
  return { tool_id: ref, chain };
}

// --- MCP ------------------------------------------------------------------------------

/** A tool's answer: the JSON as text (for clients that read only text) and as structuredContent. */
function ok(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }], structuredContent: value };
}

/** Any failure as a tool error. Kiwi's SQL functions raise user-facing messages (naming the
 * tool) with a hint; connection problems are reported as the registry being unavailable. */
function failure(error: unknown): CallToolResult {
  let text: string;
  if (error instanceof ToolError) {
    text = error.message;
  } else if (error instanceof LoginError) {
    console.error("registry:", error.message);
    text = `the registry is not configured: ${error.message}`;
  } else if (error instanceof postgres.PostgresError) {
    text = error.hint ? `${error.message}\nhint: ${error.hint}` : error.message;
  } else {
    console.error("registry: unexpected error:", error);
    text = `the registry is unavailable: ${error instanceof Error ? error.message : String(error)}`;
  }
  return { content: [{ type: "text", text }], isError: true };
}

function guarded<A>(fn: (args: A) => Promise<Record<string, unknown>>) {
  return async (args: A): Promise<CallToolResult> => {
    try {
      return ok(await fn(args));
    } catch (error) {
      return failure(error);
    }
  };
}

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

/** A fresh server per request: the stateless streamable HTTP transport is single-use. */
export function buildServer(): McpServer {
  const server = new McpServer(
    { name: "kiwi-registry", version: "0.1.0" },
    {
      instructions: "Kiwi's tool registry, read-only: `search` finds tools, `load` reads one " +
        "(manifest, files, signature state), `resolve` gives its executor chain down to a primitive.",
    },
  );

  server.registerTool("search", {
    title: "Search the registry",
    description: "Search public tools by words (ids, names, tags, description, parameters; any of the words, " +
      "typos tolerated; by words only here: search_mode says so). Ranked; returns tool_id, tool_type, " +
      "latest_version, description and matched_by of each. Next: load(tool_id).",
    inputSchema: {
      query: z.string().describe("Words to look for, e.g. 'hello' or 'read file'."),
      tool_type: z.string().optional().describe("Only this tool_type (e.g. script, runtime, mcp_server)."),
      category: z.string().optional().describe("Only this category."),
      limit: z.number().int().min(1).max(100).optional().describe("At most this many results (1..100, default 20)."),
    },
    annotations: READ_ONLY,
  }, guarded(search));

  server.registerTool("load", {
    title: "Load a tool version",
    description: "One version of a tool (default its latest): manifest, manifest_yaml, content_hash, files " +
      "(path, sha256, size_bytes, is_entrypoint, media_type, content_text) and signature state.",
    inputSchema: {
      tool_id: z.string().describe("tool_id, namespace/tool_id, or tool_id@version (e.g. 'hello_world')."),
      version: z.string().optional().describe("A semver version; default the latest."),
    },
    annotations: READ_ONLY,
  }, guarded(load));

  server.registerTool("resolve", {
    title: "Resolve the executor chain",
    description: "The chain from a tool (depth 0) through its executors down to a primitive, latest versions: " +
      "depth, tool_id, tool_type, executor_id, version, content_hash.",
    inputSchema: {
      tool_id: z.string().describe("tool_id or namespace/tool_id."),
      include_manifest: z.boolean().optional().describe("Also return each element's manifest (default false)."),
    },
    annotations: READ_ONLY,
  }, guarded(resolve));

  return server;
}
