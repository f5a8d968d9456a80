-- A directive's permissions cover what the sandboxes of the MCP servers it requires reach,
-- as they cover its tools' (each network entry by permissions.net, each path mounted
-- read-only by fs_read or fs_write, each path mounted read-write by fs_write): every call
-- to a server's tool runs in its sandbox. Publishing refuses one that does not, naming the
-- server and the host or path; a remote server has no sandbox to check.
begin;
\ir ../_setup.sql
select plan(9);

-- A stdio server whose sandbox reads and writes host paths (an admin may widen a sandbox).
select public.publish_tool_version(
  '{"tool_id": "sbx_files_mcp", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0",
    "config": {"transport": "stdio", "command": "true",
               "sandbox": {"fs": {"read": ["/srv/data"], "write": ["${KIWI_OUT:-out}"]}}}}',
  '[]');

-- A directive with the given requires and permissions: 'published' or the refusal.
create function tests.publish_directive(p_requires jsonb, p_permissions jsonb) returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(
    jsonb_strip_nulls(jsonb_build_object(
      'tool_id', 'sbx_directive_' || substr(md5(random()::text), 1, 8), 'tool_type', 'directive', 'executor', 'directive_runtime',
      'version', '1.0.0', 'entrypoint', 'd.md', 'requires', p_requires, 'permissions', p_permissions)),
    '[{"path": "d.md", "content_text": "# do it"}]');
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select is(tests.publish_directive('{"mcp": [{"server": "filesystem_mcp", "tools": ["read_file"]}]}',
                                  '{"mcp": ["filesystem_mcp.*"], "fs_write": ["${KIWI_FILESYSTEM_ROOT:-.}"]}'),
  'invalid manifest: requires.mcp[1].server: filesystem_mcp reaches registry.npmjs.org:443, not covered by permissions.net []',
  'a required server reaching a host the directive does not permit is refused, naming the server and the host');
select is(tests.publish_directive('{"mcp": [{"server": "filesystem_mcp", "tools": ["read_file"], "required": false}]}',
                                  '{"mcp": ["filesystem_mcp.*"], "net": ["*:80"], "fs_write": ["${KIWI_FILESYSTEM_ROOT:-.}"]}'),
  'invalid manifest: requires.mcp[1].server: filesystem_mcp reaches registry.npmjs.org:443, not covered by permissions.net ["*:80"]',
  'an optional server counts too, and the net globs it declares are named');
select is(tests.publish_directive('{"mcp": [{"server": "filesystem_mcp", "tools": ["read_file"]}]}',
                                  '{"mcp": ["filesystem_mcp.*"], "net": ["registry.npmjs.org:443"], "fs_write": ["tools/**"]}'),
  'invalid manifest: requires.mcp[1].server: filesystem_mcp writes ${KIWI_FILESYSTEM_ROOT:-.}, not covered by permissions.fs_write ["tools/**"]',
  'a path the server writes needs fs_write; a ${VAR} is compared as written');
select is(tests.publish_directive('{"mcp": [{"server": "filesystem_mcp", "tools": ["read_file"]}]}',
                                  '{"mcp": ["filesystem_mcp.*"], "net": ["registry.npmjs.org:443"], "fs_write": ["${KIWI_FILESYSTEM_ROOT:-.}"]}'),
  'published', 'permissions covering the server''s host and path let it publish');

select is(tests.publish_directive('{"mcp": [{"server": "github_mcp", "tools": ["get_me"]}, {"server": "sbx_files_mcp", "tools": ["ls"]}]}',
                                  '{"mcp": ["*.*"], "fs_read": ["/etc/*"], "fs_write": ["out/**"]}'),
  'invalid manifest: requires.mcp[2].server: sbx_files_mcp reads /srv/data, not covered by permissions.fs_read ["/etc/*"] or permissions.fs_write ["out/**"]; '
  || 'requires.mcp[2].server: sbx_files_mcp writes ${KIWI_OUT:-out}, not covered by permissions.fs_write ["out/**"]',
  'every path not covered is named, with the server''s place in requires.mcp');
select is(tests.publish_directive('{"mcp": [{"server": "sbx_files_mcp", "tools": ["ls"]}]}',
                                  '{"mcp": ["sbx_files_mcp.*"], "fs_write": ["/srv/**", "${KIWI_OUT:-out}"]}'),
  'published', 'a path the server reads may be covered by fs_write');

select is(tests.publish_directive('{"mcp": [{"server": "github_mcp", "tools": ["get_me"]}]}', '{"mcp": ["github_mcp.*"]}'),
  'published', 'a remote server''s plan ends in http_client and has no sandbox: nothing to check');
select is(tests.publish_directive('{"mcp": [{"server": "sbx_not_yet_published_mcp", "tools": ["x"]}]}', '{"mcp": ["*.*"]}'),
  'published', 'a server that does not resolve yet has no sandbox to check: it may be published later');

select is(kiwi_internal.directive_coverage_problems(
            (select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid
              where t.ref = 'create_script_tool' and v.is_latest)),
  '{}'::text[], 'the seeded directive''s permissions cover the host and path of the filesystem server it requires');

select * from finish();
rollback;
