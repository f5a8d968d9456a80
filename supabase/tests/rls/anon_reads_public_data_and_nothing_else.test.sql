-- The anon column of the matrix, across tables, views and RPCs: public tools with
-- their versions and files, the namespace directory and the executor matrix are
-- readable; unlisted tools only by exact reference; private tools and memberships not
-- at all; and nothing is writable, not even through kiwi_internal.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(34);
select tests.make_acme();
select tests.act_as_user('anon');

-- tables
select results_eq($$select ref from tools where namespace = 'acme'$$,
  $$values ('acme/public_tool')$$, 'anon reads the public acme tool and no other');
select is_empty($$select ref from tools where visibility <> 'public'$$,
  'anon reads no unlisted or private tool anywhere');
select ok((select count(*) from tools where ref in ('bash_runtime', 'subprocess')) = 2,
  'anon reads the public namespace''s runtimes and primitives');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%'$$,
  $$values ('acme/public_tool')$$, 'anon reads the public acme tool''s version and no other');
select is_empty($$select v.id from tool_versions v where coalesce(v.manifest ->> 'visibility', 'public') <> 'public'$$,
  'anon reads no version of an unlisted or private tool');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh'$$,
  $$values ('echo public')$$, 'anon reads the public acme tool''s file and no other');
select results_eq($$select namespace, display_name from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme', 'Acme'), ('public', 'Public')$$, 'anon reads the namespace directory');
select throws_ok($$select count(*) from namespace_members$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot read who belongs to a namespace');
select is((select count(*)::int from tool_type_rules), 10, 'anon reads the executor matrix');

-- views (security_invoker: the same rules)
select results_eq($$select tool_id, executor_chain from tool_catalog where namespace = 'acme'$$,
  $$values ('acme/public_tool', 'acme/public_tool -> bash_runtime -> subprocess')$$,
  'anon''s tool_catalog lists the public acme tool and no other');
select results_eq($$select tool_id, version, status from tool_version_history where tool_id like 'acme/%'$$,
  $$values ('acme/public_tool', '1.0.0', 'latest')$$,
  'anon''s tool_version_history shows the public acme tool and no other');
select is_empty($$select t from tool_dependents d, unnest(d.tools) t where t like 'acme/%' and t <> 'acme/public_tool'$$,
  'anon''s tool_dependents names no unlisted or private tool');

-- read RPCs
select results_eq($$select tool_id from resolve_executor_chain('acme/public_tool') order by depth$$,
  $$values ('acme/public_tool'), ('bash_runtime'), ('subprocess')$$, 'anon resolves a public tool''s chain');
select results_eq($$select tool_id from resolve_executor_chain('acme/unlisted_tool') order by depth$$,
  $$values ('acme/unlisted_tool'), ('bash_runtime'), ('subprocess')$$,
  'anon resolves an unlisted tool by its exact reference');
select throws_ok($$select * from resolve_executor_chain('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'anon cannot resolve a private tool');
select is(resolve_execution_plan('acme/public_tool') #>> '{files,0,content_text}', 'echo public',
  'anon gets a public tool''s plan with its file');
select throws_ok($$select resolve_execution_plan('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'anon gets no plan for a private tool');
select results_eq($$select tool_id from search_tools('acme') order by 1$$,
  $$values ('acme/public_tool')$$, 'anon''s search finds only the public acme tool');

-- direct writes: one per table (the per-table files hold the full matrix)
select throws_ok($$insert into namespaces (namespace, owner_id) values ('anon_co', null)$$,
  '42501', 'permission denied for table namespaces', 'anon cannot create a namespace');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('acme', gen_random_uuid())$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot join a namespace');
select throws_ok($$update tools set description = 'defaced'$$,
  '42501', 'permission denied for table tools', 'anon cannot update tools');
select throws_ok($$update tool_versions set is_yanked = true$$,
  '42501', 'permission denied for table tool_versions', 'anon cannot update versions');
select throws_ok($$delete from tool_version_files$$,
  '42501', 'permission denied for table tool_version_files', 'anon cannot delete files');
select throws_ok($$delete from tool_type_rules$$,
  '42501', 'permission denied for table tool_type_rules', 'anon cannot delete tool types');

-- write RPCs
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/anon_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo anon"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'anon cannot publish into acme');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "anon_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo anon"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'anon cannot publish into the public namespace');
select throws_ok($$select yank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'permission denied for function yank_tool_version', 'anon may not execute yank_tool_version');
select throws_ok($$select unyank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'permission denied for function unyank_tool_version', 'anon may not execute unyank_tool_version');
select throws_ok($$select deprecate_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'permission denied for function deprecate_tool_version', 'anon may not execute deprecate_tool_version');
select throws_ok($$select delete_tool('acme/public_tool')$$,
  '42501', 'permission denied for function delete_tool', 'anon may not execute delete_tool');

-- kiwi_internal is not an API, but anon holds usage on it: its write entry points are not
-- anon's to execute at all
select throws_ok($$select kiwi_internal.set_version_status('acme/public_tool', '1.0.0', 'yank', null)$$,
  '42501', 'permission denied for function set_version_status', 'anon cannot yank through kiwi_internal either');
select throws_ok($$select kiwi_internal.delete_tool('acme/public_tool')$$,
  '42501', 'permission denied for function delete_tool', 'anon cannot delete a tool through kiwi_internal either');
select throws_ok($$select kiwi_internal.refresh_latest(gen_random_uuid())$$,
  '42501', 'permission denied for function refresh_latest', 'anon may not execute kiwi_internal.refresh_latest');

select tests.act_as_admin();
select results_eq($$select ref, description from tools where namespace = 'acme' order by 1$$,
  $$values ('acme/private_tool', 'acme private tool'), ('acme/public_tool', 'acme public tool'),
           ('acme/unlisted_tool', 'acme unlisted tool')$$,
  'anon changed nothing');

select * from finish();
rollback;
