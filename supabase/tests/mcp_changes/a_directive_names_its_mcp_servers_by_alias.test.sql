-- A directive's requires.mcp may give each server an alias (the name its tools are called by,
-- alias.tool): a short name, each used once.
begin;
\ir ../_setup.sql
select plan(4);

create function tests.directive(p_mcp jsonb) returns jsonb language sql as $$
  select public.publish_tool_version(
    jsonb_build_object('tool_id', 'aliased_' || substr(md5(p_mcp::text), 1, 8), 'tool_type', 'directive',
                       'executor', 'directive_runtime', 'version', '1.0.0', 'entrypoint', 'd.md',
                       'requires', jsonb_build_object('mcp', p_mcp),
                       'permissions', '{"mcp": ["*.*"], "fs_read": ["**"], "fs_write": ["**"], "net": ["registry.npmjs.org:443"]}'::jsonb),
    '[{"path": "d.md", "content_text": "use db.read_file", "is_entrypoint": true}]'::jsonb) $$;

select is(tests.directive('[{"server": "filesystem_mcp", "alias": "files", "tools": ["read_file"]}]') ->> 'created', 'true',
  'an alias names the server');
select throws_like($$select tests.directive('[{"server": "filesystem_mcp", "alias": "not ok!", "tools": ["read_file"]}]')$$,
  '%requires.mcp[1].alias: must be a short name%', 'an alias is a short name');
select throws_like($$select tests.directive('[{"server": "filesystem_mcp", "alias": "x", "tools": ["read_file"]},
                                              {"server": "everything_mcp", "alias": "x", "tools": ["echo"]}]')$$,
  '%requires.mcp[2].alias: "x" is used twice%', 'each alias names one server');
select throws_like($$select tests.directive('[{"server": "filesystem_mcp", "as": "x", "tools": ["read_file"]}]')$$,
  '%unknown field (allowed: server, alias, tools, required)%', 'the refusal of an unknown key names alias among the allowed');

select * from finish();
rollback;
