-- The executor matrix, as data: which tool types exist, which may execute which, and
-- which primitive a type's chain must end in. Triggers on tools and tool_versions
-- enforce it; the dashboard shows it as it is.

create table public.tool_type_rules (
  tool_type          text primary key,
  requires_executor  boolean not null,
  executor_types     text[] not null default '{}',
  terminal_primitive text,
  description        text not null,
  -- The config keys the runner reads for every tool of this type, whatever its chain (an
  -- mcp_server's transport, an mcp_tool's tool): a JSON Schema, part of the config contract
  -- of every chain with an element of this type. Set by 150_config_contracts.sql.
  config_schema      jsonb,
  constraint executor_types_match check (requires_executor = (cardinality(executor_types) > 0))
);
comment on table public.tool_type_rules is
  'Executor matrix: a tool of tool_type may name an executor of one of executor_types; its chain must end in terminal_primitive when set.';

alter table public.tool_type_rules enable row level security;
revoke all on table public.tool_type_rules from public, anon, authenticated;
grant select on table public.tool_type_rules to anon, authenticated;
grant all on table public.tool_type_rules to service_role;
create policy "the executor matrix is public"
  on public.tool_type_rules for select to anon, authenticated
  using (true);

insert into public.tool_type_rules (tool_type, requires_executor, executor_types, terminal_primitive, description) values
  ('primitive',  false, '{}',                     null,          'Code in the runner: subprocess or http_client. Every chain ends in one.'),
  ('runtime',    true,  '{primitive,runtime}',    null,          'Says how to prepare an environment and invoke an entrypoint (Python, Bash, Node...).'),
  ('mcp_server', true,  '{primitive,runtime}',    null,          'A connection to an MCP server: stdio through subprocess, remote through http_client.'),
  ('mcp_tool',   true,  '{mcp_server}',           null,          'One tool of an MCP server, named server.tool.'),
  ('script',     true,  '{runtime}',              null,          'Files run by a runtime.'),
  ('api',        true,  '{primitive,runtime}',    'http_client', 'An HTTP endpoint described as data.'),
  ('directive',  true,  '{runtime}',              null,          'Instructions for an agent, with the tools and permissions they need.'),
  ('thread',     true,  '{runtime}',              null,          'A directive run by a model through an LLM runtime.'),
  ('knowledge',  false, '{}',                     null,          'Content to load and cite; never executed.'),
  ('composite',  true,  '{runtime}',              null,          'A tool built from other tools, run by a runtime that orchestrates them.');
