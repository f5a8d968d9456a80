-- A tool's contract is its chain's: every key its primitive, runtimes and tool types
-- declare may be set on the tool itself (the child wins when configs merge), and a key
-- only another chain declares may not.
begin;
\ir ../_setup.sql
select plan(8);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[]') returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select is(tests.refusal('{"tool_id": "all_keys", "tool_type": "script", "executor": "python_runtime", "version": "1.0.0",
    "config": {"command": "python3", "args": ["{entrypoint}"], "env": {"A": "1", "B": null}, "env_passthrough": ["LANG"],
               "timeout": 5, "max_output_bytes": 1000, "entrypoint": "main.py", "requires": ["humanize"],
               "fs": {"read": ["path"]},
               "validation": {"rules": [{"type": "shebang_required", "pattern": "^#!"},
                                        {"type": "pattern_check", "patterns": {"dangerous": ["os\\.system"]}, "warn_only": true}]}}}',
    '[{"path": "main.py", "content_text": "#!/usr/bin/env python3\n"}]'),
  'published', 'a script on python_runtime may set subprocess''s keys and python_runtime''s requires');
select is(tests.refusal('{"tool_id": "api_keys", "tool_type": "api", "executor": "http_client", "version": "1.0.0",
    "config": {"method": "POST", "url": "http://example.test/{id}", "headers": {"X": "y"}, "query": {"q": "{q}"},
               "auth": {"type": "api_key", "name": "key", "value": "${KEY}", "in": "query"},
               "body_template": {"id": "{id}"}, "follow_redirects": false, "max_redirects": 0, "timeout": 2,
               "retries": 0, "retry_delay": 1, "retryable_statuses": [503], "response_transform": "$.data",
               "max_response_bytes": 100}}'),
  'published', 'an API tool may set every key of http_client');
select is(tests.refusal('{"tool_id": "thread_keys", "tool_type": "thread", "executor": "llm_runtime", "version": "1.0.0",
    "config": {"directive": "create_script_tool", "tier": "fast", "budget": {"tokens": 1000, "tool_calls": 3, "seconds": 30},
               "timeout": 60, "tiers": {"mine": {"provider": "anthropic", "model": "m"}}}}'),
  'published', 'a thread may set llm_runtime''s keys and http_client''s below it');

-- an MCP server and its tools: the keys of their tool types (tool_type_rules.config_schema)
select is(tests.refusal('{"tool_id": "keys_mcp", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0",
    "config": {"transport": "stdio", "command": "node", "args": ["server.js"], "startup_timeout_s": 5, "idle_shutdown_s": 60,
               "tool_fs": {"read_file": {"read": ["path"]}}}}'),
  'published', 'an MCP server may set its type''s keys and its primitive''s');
select is(tests.refusal('{"tool_id": "keys_mcp.read_file", "tool_type": "mcp_tool", "executor": "keys_mcp", "version": "1.0.0",
    "config": {"tool": "read_file", "annotations": {"readOnlyHint": true}, "idempotent": true, "retries": 1, "timeout_s": 2}}'),
  'published', 'its tool may set the mcp_tool keys and the timeout of the chain');
select is((select v.manifest -> 'config' ->> 'timeout' from public.tool_versions v join public.tools t on t.id = v.tool_uuid
            where t.ref = 'keys_mcp.read_file'), '2', 'whose old spelling is made canonical there too');
select matches(tests.refusal('{"tool_id": "not_mcp", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config": {"tool": "x", "transport": "stdio"}}', '[{"path": "main.sh", "content_text": "echo"}]'),
  'config\.tool: unknown key.*config\.transport: unknown key', 'an MCP tool''s and server''s keys are not a script''s');
select matches(tests.refusal('{"tool_id": "mcp_with_tool", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0",
    "config": {"command": "node", "tool": "x"}}'),
  'config\.tool: unknown key', 'nor is an mcp_tool''s key a server''s');

select * from finish();
rollback;
