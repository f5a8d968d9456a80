begin;
\ir ../_setup.sql
select plan(6);

select lives_ok($$ select public.publish_tool_version(
    '{"tool_id": "good_directive", "tool_type": "directive", "executor": "directive_runtime",
      "version": "1.0.0", "entrypoint": "directive.md",
      "parameters": [{"name": "topic", "type": "string", "required": true}],
      "requires": {"tools": ["bash_runtime", {"id": "python_runtime", "required": false, "version": "1.0.0"},
                             {"id": "acme/not_yet_published"}],
                   "mcp": [{"server": "github_mcp", "tools": ["create_issue", "search code"], "required": false}]},
      "permissions": {"fs_read": ["**/*.md"], "fs_write": ["out/**"], "shell": ["git status"],
                      "mcp": ["github_mcp.*", "*.*"], "tools": ["kiwi_*", "acme/*", "*_runtime"]},
      "cites": ["kiwi_tool_authoring"]}',
    '[{"path": "directive.md", "content_text": "# Do the thing\n"}]') $$,
  'a directive with requires, permissions and cites is published');

select is((select v.manifest #>> '{requires,tools,0}' from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'good_directive'), 'bash_runtime', 'its declarations are stored as given');
select is((select v.manifest #> '{permissions,mcp}' from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'good_directive'), '["github_mcp.*", "*.*"]'::jsonb, 'its permissions are stored as given');
select is((select array_agg(tool_id order by depth) from resolve_executor_chain('good_directive')),
  array['good_directive', 'directive_runtime', 'subprocess'], 'it runs on the directive runtime');
select is(kiwi_internal.directive_problems((select v.manifest from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'create_script_tool')), '{}'::text[], 'the seeded directive is valid');
select ok((select v.manifest ? 'requires' and v.manifest ? 'permissions' and v.manifest ? 'cites'
             from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'create_script_tool'),
  'the seeded directive declares requires, permissions and cites');

select * from finish();
rollback;
