-- A directive's permissions cover what the sandboxes of the tools it requires reach: each
-- network entry by permissions.net, each path mounted read-only by fs_read or fs_write,
-- each path mounted read-write by fs_write. Publishing refuses one that does not, naming
-- the tool and the host or path, as it names a tool its permissions do not cover.
begin;
\ir ../_setup.sql
select plan(9);

-- Tools whose sandboxes reach a host, and host paths (an admin may widen a sandbox).
select public.publish_tool_version(
  '{"tool_id": "sbx_fetch", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "entrypoint": "f.sh", "config": {"sandbox": {"network": ["127.0.0.1:8080"]}}}',
  '[{"path": "f.sh", "content_text": "echo fetched"}]');
select public.publish_tool_version(
  '{"tool_id": "sbx_files", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "entrypoint": "f.sh", "config": {"sandbox": {"fs": {"read": ["/srv/data"], "write": ["${KIWI_OUT:-out}"]}}}}',
  '[{"path": "f.sh", "content_text": "echo filed"}]');

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

select is(tests.publish_directive('{"tools": ["sbx_fetch"]}', '{"tools": ["sbx_*"]}'),
  'invalid manifest: requires.tools[1].id: sbx_fetch reaches 127.0.0.1:8080, not covered by permissions.net []',
  'a required tool reaching a host the directive does not permit is refused, naming the host');
select is(tests.publish_directive('{"tools": ["sbx_fetch"]}', '{"tools": ["sbx_*"], "net": ["127.0.0.2:*", "*:443"]}'),
  'invalid manifest: requires.tools[1].id: sbx_fetch reaches 127.0.0.1:8080, not covered by permissions.net ["127.0.0.2:*", "*:443"]',
  'and the net globs it declares');
select is(tests.publish_directive('{"tools": ["sbx_fetch"]}', '{"tools": ["sbx_*"], "net": ["127.0.0.1:*"]}'),
  'published', 'a net glob covering the host lets it publish');
select is(tests.publish_directive('{"tools": [{"id": "sbx_fetch", "required": false}]}', '{"tools": ["sbx_fetch"], "net": []}'),
  'invalid manifest: requires.tools[1].id: sbx_fetch reaches 127.0.0.1:8080, not covered by permissions.net []',
  'an optional tool counts too');

select is(tests.publish_directive('{"tools": ["bash_runtime", "sbx_files"]}', '{"tools": ["*"], "fs_read": ["/srv/*"]}'),
  'invalid manifest: requires.tools[2].id: sbx_files writes ${KIWI_OUT:-out}, not covered by permissions.fs_write []',
  'a path the tool writes needs fs_write, whatever fs_read allows; a ${VAR} is compared as written');
select is(tests.publish_directive('{"tools": ["sbx_files"]}', '{"tools": ["*"], "fs_write": ["out/**"]}'),
  'invalid manifest: requires.tools[1].id: sbx_files reads /srv/data, not covered by permissions.fs_read [] or permissions.fs_write ["out/**"]; '
  || 'requires.tools[1].id: sbx_files writes ${KIWI_OUT:-out}, not covered by permissions.fs_write ["out/**"]',
  'every host and path not covered is named');
select is(tests.publish_directive('{"tools": ["sbx_files"]}', '{"tools": ["*"], "fs_write": ["/srv/**", "${KIWI_OUT:-out}"]}'),
  'published', 'a path the tool reads may be covered by fs_write');

select is(tests.publish_directive('{"tools": ["sbx_not_yet_published"]}', '{"tools": ["sbx_*"]}'),
  'published', 'a tool that does not resolve yet has no sandbox to check: it may be published later');
select is(kiwi_internal.directive_coverage_problems(
            (select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid
              where t.ref = 'create_script_tool' and v.is_latest)),
  '{}'::text[], 'the seeded directive''s permissions cover what its tools and servers reach');

select * from finish();
rollback;
