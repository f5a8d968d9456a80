-- A directive declares the tools it uses (requires.tools, requires.mcp) and what the
-- agent following it may do (permissions.tools, permissions.mcp). A declared tool its
-- permissions do not cover could never be called under its context, so publishing
-- refuses it, naming every uncovered one, optional ones included.
begin;
\ir ../_setup.sql
select plan(9);

-- A directive with the given requires and permissions: 'published' or the refusal.
create function tests.publish_directive(p_requires jsonb, p_permissions jsonb) returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(
    jsonb_strip_nulls(jsonb_build_object(
      'tool_id', 'cover_directive_' || substr(md5(random()::text), 1, 8), 'tool_type', 'directive', 'executor', 'directive_runtime',
      'version', '1.0.0', 'entrypoint', 'd.md', 'requires', p_requires, 'permissions', p_permissions)),
    '[{"path": "d.md", "content_text": "# do it"}]');
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select is(tests.publish_directive(
            '{"mcp": [{"server": "github_mcp", "tools": ["create_issue", "delete_repository"]}]}',
            '{"mcp": ["filesystem_mcp.read_file"]}'),
  'invalid manifest: requires.mcp[1].tools[1]: github_mcp.create_issue is not covered by permissions.mcp ["filesystem_mcp.read_file"]; '
  || 'requires.mcp[1].tools[2]: github_mcp.delete_repository is not covered by permissions.mcp ["filesystem_mcp.read_file"]',
  'an MCP tool the permissions do not cover is refused, each one named as server.tool');
select is(tests.publish_directive(
            '{"tools": ["bash_runtime", {"id": "acme/deploy", "required": false}]}',
            '{"tools": ["bash_runtime"]}'),
  'invalid manifest: requires.tools[2].id: acme/deploy is not covered by permissions.tools ["bash_runtime"]',
  'a registry tool the permissions do not cover is refused, even an optional one');
select is(tests.publish_directive('{"tools": ["python_runtime"]}', null),
  'invalid manifest: requires.tools[1].id: python_runtime is not covered by permissions.tools []',
  'without permissions a directive may use nothing it declares');
select is(tests.publish_directive(
            '{"tools": ["bash_runtime"], "mcp": [{"server": "github_mcp", "tools": ["create_issue"]}]}',
            '{"tools": ["*"], "mcp": ["filesystem_mcp.*"]}'),
  'invalid manifest: requires.mcp[1].tools[1]: github_mcp.create_issue is not covered by permissions.mcp ["filesystem_mcp.*"]',
  'permissions.tools does not cover MCP tools: permissions.mcp does');

select is(tests.publish_directive(
            '{"tools": ["public/bash_runtime", "acme/x"], "mcp": [{"server": "github_mcp", "tools": ["create_issue", "search_code"]}]}',
            '{"tools": ["bash_runtime", "acme/*"], "mcp": ["github_mcp.*"]}'),
  'published', 'globs cover what they match, and public/x is x');
select is(tests.publish_directive(
            '{"mcp": [{"server": "filesystem_mcp", "tools": ["read_file"]}]}',
            '{"mcp": ["filesystem_mcp.read_file"], "fs_read": ["**"],
              "fs_write": ["${KIWI_FILESYSTEM_ROOT:-.}"], "net": ["registry.npmjs.org:443"]}'),
  'published', 'an exact server.tool covers itself');
select is(tests.publish_directive(null, '{"tools": ["kiwi_*"]}'), 'published',
  'a directive that declares nothing is covered');

select is(kiwi_internal.directive_coverage_problems(
            (select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid
              where t.ref = 'create_script_tool' and v.is_latest)),
  '{}'::text[], 'the seeded directive declares only what its permissions cover');
select is(kiwi_internal.directive_coverage_problems(
            '{"tool_type": "script", "requires": {"tools": ["x"]}}'), '{}'::text[],
  'only directives and threads are checked for coverage (others may not declare requires at all)');

select * from finish();
rollback;
