// Kiwi's registry as a remote MCP server: a Supabase Edge Function (Deno) speaking
// streamable HTTP, read-only, for clients that do not run Kiwi's Python runner.
//
//   tools: search, load, resolve   (see registry.ts)
//   deployed:  supabase functions deploy registry   -> https://<project>.supabase.co/functions/v1/registry
//   locally:   deno run --allow-net --allow-env --allow-read supabase/functions/registry/index.ts
//              (PORT, default 8000; database from SUPABASE_DB_URL, KIWI_DATABASE_URL or the local default)
//
// It answers on any path (Supabase routes /functions/v1/registry to it). Stateless: each
// POST gets a fresh MCP server and transport, and JSON responses rather than SSE streams,
// which suits short-lived edge workers; GET (a server-to-client stream) is refused with
// 405, as the specification allows, except for a plain GET that is a health check.

import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { buildServer } from "./registry.ts";

const CORS: Record<string, string> = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
  "Access-Control-Allow-Headers": "authorization, x-client-info, apikey, content-type, accept, " +
    "mcp-protocol-version, mcp-session-id, last-event-id",
  "Access-Control-Expose-Headers": "mcp-protocol-version, mcp-session-id",
};

function withCors(response: Response): Response {
  const headers = new Headers(response.headers);
  for (const [k, v] of Object.entries(CORS)) headers.set(k, v);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

export async function handle(request: Request): Promise<Response> {
  if (request.method === "OPTIONS") return new Response(null, { status: 204, headers: CORS });
  if (request.method === "GET" && !(request.headers.get("accept") ?? "").includes("text/event-stream")) {
    return withCors(
      Response.json({ name: "kiwi-registry", transport: "streamable-http", tools: ["search", "load", "resolve"] }),
    );
  }
  if (request.method !== "POST") {
    return withCors(
      new Response(
        JSON.stringify({
          jsonrpc: "2.0",
          error: { code: -32000, message: "Method not allowed: POST MCP messages here" },
          id: null,
        }),
        {
          status: 405,
          headers: { "content-type": "application/json", allow: "POST, OPTIONS" },
        },
      ),
    );
  }
  const server = buildServer();
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined, // stateless
    enableJsonResponse: true,
  });
  try {
    await server.connect(transport);
    // With JSON responses the Response is complete once handleRequest resolves.
    return withCors(await transport.handleRequest(request));
  } finally {
    await server.close();
  }
}

if (import.meta.main) {
  const port = Number(Deno.env.get("PORT") ?? 8000);
  Deno.serve({
    port,
    onListen: ({ hostname, port }) => console.error(`kiwi registry MCP endpoint on http://${hostname}:${port}/`),
  }, handle);
}
