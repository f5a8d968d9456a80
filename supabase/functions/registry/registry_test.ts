// Unit tests that need no database:
//   deno test --allow-env --config supabase/functions/registry/deno.json supabase/functions/registry/
// (node:assert, since jsr:@std/assert is not reachable here). The endpoint against a real
// database is tested from Python: tests/test_edge_function.py.

import assert from "node:assert/strict";
import { handle } from "./index.ts";
import {
  checkLogin,
  databaseUrl,
  DEFAULT_DB_PORT,
  LoginError,
  searchAnswer,
  signatureState,
  splitRef,
  ToolError,
} from "./registry.ts";

Deno.test("a reference may carry a version and the public namespace", () => {
  assert.deepEqual(splitRef(" hello_world "), { ref: "hello_world", version: null });
  assert.deepEqual(splitRef("public/hello_world@1.0.0"), { ref: "hello_world", version: "1.0.0" });
  assert.deepEqual(splitRef("acme/tool@1.0.0", "2.0.0"), { ref: "acme/tool", version: "2.0.0" });
  assert.throws(() => splitRef("  "), ToolError);
});

Deno.test("the signature state is signed exactly when there are signatures", () => {
  assert.deepEqual(signatureState([]), { state: "unsigned", key_fingerprints: [], signatures: [] });
  const sig = { key_fingerprint: "ab", public_key: "k", signature: "s", content_hash: "h", signed_at: "t" };
  assert.deepEqual(signatureState([sig]).key_fingerprints, ["ab"]);
  assert.equal(signatureState([sig]).state, "signed");
});

Deno.test("a search answer says once how it was ranked, and each item how it matched", () => {
  const row = {
    tool_id: "hello_world",
    rank: "3.5",
    matched_by: "words",
    search_mode: "lexical: no query embedding given",
  };
  const answer = searchAnswer("hello", [row, { ...row, tool_id: "hello_again", rank: null }]);
  assert.equal(answer.search_mode, "lexical: no query embedding given");
  assert.equal(answer.count, 2);
  assert.deepEqual(answer.items[0], { tool_id: "hello_world", rank: 3.5, matched_by: "words" });
  assert.equal(answer.items[1].rank, null);
  assert.deepEqual(searchAnswer("zzqx", []), { query: "zzqx", count: 0, search_mode: null, items: [] });
});

Deno.test("the login is KIWI_EDGE_DATABASE_URL, else KIWI_DATABASE_URL, else the local runner login on KIWI_DB_PORT", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  assert.equal(databaseUrl(env({ KIWI_EDGE_DATABASE_URL: "e", KIWI_DATABASE_URL: "b", SUPABASE_DB_URL: "a" })), "e");
  assert.equal(databaseUrl(env({ KIWI_DATABASE_URL: "b", SUPABASE_DB_URL: "a", KIWI_DB_PORT: "6543" })), "b");
  assert.equal(
    databaseUrl(env({ KIWI_DB_PORT: "6543" })),
    "postgresql://kiwi_runner:kiwi_runner@127.0.0.1:6543/postgres",
  );
  assert.equal(databaseUrl(env({})), `postgresql://kiwi_runner:kiwi_runner@127.0.0.1:${DEFAULT_DB_PORT}/postgres`);
});

Deno.test("SUPABASE_DB_URL alone is refused, naming the login to give the function", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  assert.throws(() => databaseUrl(env({ SUPABASE_DB_URL: "postgresql://postgres:pw@db/postgres" })), (e: unknown) => {
    assert.ok(e instanceof LoginError);
    assert.match(e.message, /KIWI_EDGE_DATABASE_URL/);
    assert.match(e.message, /kiwi_registry_edge/);
    return true;
  });
});

Deno.test("a superuser login or one that bypasses RLS is refused", () => {
  assert.throws(() => checkLogin({ rolname: "postgres", rolsuper: true, rolbypassrls: true }), LoginError);
  assert.throws(() => checkLogin({ rolname: "x", rolsuper: false, rolbypassrls: true }), LoginError);
  checkLogin({ rolname: "kiwi_registry_edge", rolsuper: false, rolbypassrls: false });
});

Deno.test("a plain GET is a health check; a GET for a stream is refused with 405", async () => {
  const health = await handle(new Request("http://x/functions/v1/registry"));
  assert.equal(health.status, 200);
  assert.deepEqual((await health.json()).tools, ["search", "load", "resolve"]);
  const stream = await handle(new Request("http://x/registry", { headers: { accept: "text/event-stream" } }));
  assert.equal(stream.status, 405);
  await stream.body?.cancel();
  assert.equal((await handle(new Request("http://x/", { method: "OPTIONS" }))).status, 204);
});

Deno.test("tools/list needs no database", async () => {
  const response = await handle(
    new Request("http://x/registry", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    }),
  );
  assert.equal(response.status, 200);
  const names = (await response.json()).result.tools.map((t: { name: string }) => t.name);
  assert.deepEqual(names, ["search", "load", "resolve"]);
});
