begin;
\ir ../_setup.sql
select plan(17);

-- A directive manifest with one change (p_patch merged over a valid base).
create function tests.directive_refusal(p_patch jsonb) returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(
    '{"tool_id": "bad_directive", "tool_type": "directive", "executor": "directive_runtime",
      "version": "1.0.0", "entrypoint": "d.md"}'::jsonb || p_patch,
    '[{"path": "d.md", "content_text": "# do it"}]');
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.refusal_of_script(p_patch jsonb) returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(
    '{"tool_id": "not_directive", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}'::jsonb || p_patch,
    '[{"path": "a.sh", "content_text": "echo"}]');
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select matches(tests.directive_refusal('{"requires": {"tools": [{"id": "ok_tool"}, {"id": "has space"}]}}'),
  'requires\.tools\[2\]\.id: must be a tool reference', 'a bad required tool id is named by its position');
select matches(tests.directive_refusal('{"requires": {"tools": [{"id": "x", "required": "yes"}]}}'),
  'requires\.tools\[1\]\.required: must be true or false', 'required is a boolean');
select matches(tests.directive_refusal('{"requires": {"tools": [{"id": "x", "version": "1"}]}}'),
  'requires\.tools\[1\]\.version: must be a semantic version', 'a pinned version is semver');
select matches(tests.directive_refusal('{"requires": {"tools": [{"id": "x", "optional": true}]}}'),
  'requires\.tools\[1\]\.optional: unknown field \(allowed: id, required, version\)', 'unknown keys of a required tool are refused');
select matches(tests.directive_refusal('{"requires": {"tools": [], "servers": []}}'),
  'requires\.servers: unknown field \(allowed: tools, mcp\)', 'unknown keys inside requires are refused');
select matches(tests.directive_refusal('{"requires": {"mcp": [{"server": "github_mcp", "tools": []}]}}'),
  'requires\.mcp\[1\]\.tools: required, a non-empty list', 'an MCP requirement names its tools');
select matches(tests.directive_refusal('{"requires": {"mcp": [{"server": "github_mcp", "tools": ["a", 7]}]}}'),
  'requires\.mcp\[1\]\.tools\[2\]: must be a tool name', 'each MCP tool name is a string');
select matches(tests.directive_refusal('{"permissions": {"fs_write": [7]}}'),
  'permissions\.fs_write\[1\]: must be a glob string', 'a write glob must be a string');
select matches(tests.directive_refusal('{"permissions": {"mcp": ["github_mcp"]}}'),
  'permissions\.mcp\[1\]: must be a server\.tool pattern', 'an MCP permission is server.tool');
select matches(tests.directive_refusal('{"permissions": {"network": ["*"]}}'),
  'permissions\.network: unknown field \(allowed: fs_read, fs_write, shell, mcp, tools, net\)', 'unknown permissions are refused');
select matches(tests.directive_refusal('{"permissions": {"net": ["api.example.com", "127.0.0.1:*"]}}'),
  'permissions\.net\[1\]: must be a host:port pattern', 'a net permission is host:port');
select matches(tests.directive_refusal('{"permissions": {"shell": "bash"}}'),
  'permissions\.shell: must be a list of command strings', 'a permission is a list');
select matches(tests.directive_refusal('{"cites": ["kiwi_tool_authoring", ""]}'),
  'cites\[2\]: must be a knowledge tool reference', 'a citation is a tool reference');
select matches(tests.directive_refusal('{"requires": {"tools": "bash_runtime"}, "permissions": [], "cites": "x"}'),
  'requires\.tools: must be a list.*permissions: must be an object.*cites: must be a list',
  'every problem is reported together');
select matches(tests.directive_refusal('{"requries": {}}'),
  'requries: unknown field \(allowed: .*requires, permissions, cites\)', 'a misspelt key is refused, and the allowed list names the directive keys');
select matches(
  (select tests.refusal_of_script('{"cites": ["kiwi_tool_authoring"]}')),
  'cites: only a directive declares cites \(this is a script\)', 'only directives declare cites');
select throws_ok($$ select public.publish_tool_version(
    '{"tool_id": "bad_directive", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
      "permissions": {"fs_read": [1]}}') $$,
  '22023', null, 'directive manifest errors carry SQLSTATE 22023');

select * from finish();
rollback;
