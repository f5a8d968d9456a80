-- A child context (a thread, a subagent, a directive run from a directive) narrows its
-- parent's permissions and never widens them; a widening is refused (42501) naming the
-- permission. Subset means: every child pattern is covered by a parent glob.
begin;
\ir ../_setup.sql
select plan(14);

select public.publish_tool_version(
  '{"tool_id": "ctx_parent", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md",
    "permissions": {"fs_read": ["**"], "fs_write": ["tools/**"], "shell": ["bash", "python"],
                    "mcp": ["filesystem_mcp.*"], "tools": ["*_runtime", "hello_world"], "net": ["127.0.0.1:*"]}}',
  '[{"path": "d.md", "content_text": "# parent\n"}]');
select public.publish_tool_version(
  '{"tool_id": "ctx_wide_child", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["*"]}}',
  '[{"path": "d.md", "content_text": "# child\n"}]');
select public.publish_tool_version(
  '{"tool_id": "ctx_narrow_child", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["bash_runtime"], "fs_write": ["tools/x/*"]}}',
  '[{"path": "d.md", "content_text": "# child\n"}]');

create temp table ctx as select (public.open_context('s-ctx', 'ctx_parent') ->> 'id')::uuid as id;

select is(public.open_context('s-ctx', null, (select id from ctx), '{"tools": ["bash_runtime"], "fs_write": ["tools/a/*"]}') -> 'permissions',
  '{"fs_read": ["**"], "fs_write": ["tools/a/*"], "shell": ["bash", "python"], "mcp": ["filesystem_mcp.*"], "tools": ["bash_runtime"], "net": ["127.0.0.1:*"]}'::jsonb,
  'a child narrows the kinds it names and keeps the parent''s others');
select throws_ok(format($$select public.open_context('s-ctx', null, %L, '{"fs_write": ["**"]}')$$, (select id from ctx)),
  '42501', 'permissions.fs_write: "**" is wider than the parent''s ["tools/**"]',
  'a child cannot widen its parent''s permissions: the refusal names the permission');
select throws_ok(format($$select public.open_context('s-ctx', null, %L, '{"tools": ["hello_*"]}')$$, (select id from ctx)),
  '42501', 'permissions.tools: "hello_*" is wider than the parent''s ["*_runtime", "hello_world"]',
  'a pattern is wider than an exact id it would match');
select throws_ok(format($$select public.open_context('s-ctx', null, %L, '{"net": ["*:443"]}')$$, (select id from ctx)),
  '42501', 'permissions.net: "*:443" is wider than the parent''s ["127.0.0.1:*"]',
  'a child cannot reach more hosts than its parent');
select throws_ok(format($$select public.open_context('s-ctx', null, %L, '{"shell": ["bash", "rm"]}')$$, (select id from ctx)),
  '42501', 'permissions.shell: "rm" is wider than the parent''s ["bash", "python"]',
  'one pattern too many is enough to refuse');
select throws_ok(format($$select public.open_context('s-ctx', 'ctx_wide_child', %L)$$, (select id from ctx)),
  '42501', 'permissions.tools: "*" is wider than the parent''s ["*_runtime", "hello_world"]',
  'a directive run under a context cannot declare more than that context allows');
select is(public.open_context('s-ctx', 'ctx_narrow_child', (select id from ctx)) -> 'permissions',
  '{"fs_read": ["**"], "fs_write": ["tools/x/*"], "shell": ["bash", "python"], "mcp": ["filesystem_mcp.*"], "tools": ["bash_runtime"], "net": ["127.0.0.1:*"]}'::jsonb,
  'a child directive gets what it declares; what it does not declare is its parent''s');

select is(public.open_context('s-ctx', null, (select id from ctx)) ->> 'directive', 'ctx_parent@1.0.0',
  'a child without a directive of its own follows its parent''s');

create temp table grandchild as
  select (public.open_context('s-ctx', null, (select id from ctx), '{"tools": ["bash_runtime"]}') ->> 'id')::uuid as id;
select throws_ok(format($$select public.open_context('s-ctx', null, %L, '{"tools": ["hello_world"]}')$$, (select id from grandchild)),
  '42501', 'permissions.tools: "hello_world" is wider than the parent''s ["bash_runtime"]',
  'a grandchild cannot take back what its parent gave up');

-- a directive context narrowed at the top level, by what the directive declares
select throws_ok($$select public.open_context('s-ctx', 'ctx_parent', null, '{"tools": ["*"]}')$$,
  '42501', 'permissions.tools: "*" is wider than the directive ctx_parent@1.0.0''s ["*_runtime", "hello_world"]',
  'narrowing a directive''s permissions cannot widen them either');
select is(public.open_context('s-ctx', 'ctx_wide_child') -> 'permissions',
  '{"fs_read": [], "fs_write": [], "shell": ["*"], "mcp": [], "tools": ["*"], "net": []}'::jsonb,
  'at the top level a directive gets what it declares, nothing it does not (shell: unrestricted; net: no host)');
select is(public.open_context('s-ctx') -> 'permissions',
  '{"fs_read": ["*"], "fs_write": ["*"], "shell": ["*"], "mcp": ["*"], "tools": ["*"], "net": ["*"]}'::jsonb,
  'a session''s default context (no directive, no parent) is unrestricted');
select throws_ok($$select public.open_context('s-ctx', null, null, '{"tools": ["no spaces"]}')$$,
  '22023', null, 'malformed permissions are refused');
select throws_ok($$select public.open_context('s-ctx', 'hello_world')$$,
  '22023', 'hello_world is a script, not a directive: only directives declare permissions',
  'only a directive gives a context its permissions');

select * from finish();
rollback;
