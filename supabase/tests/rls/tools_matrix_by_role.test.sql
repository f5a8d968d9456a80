-- tools × {select, insert, update, delete} × {anon, owner, member, stranger,
-- service_role}. Reads follow visibility and membership; nobody but service_role
-- writes the table directly (publish_tool_version and the lifecycle RPCs are the write
-- path). service_role's direct inserts are in
-- service_role_writes_directly_but_triggers_keep_integrity.test.sql.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(31);
select tests.make_acme();

-- select
select tests.act_as_user('anon');
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/public_tool')$$, 'anon sees only the public acme tool');
select ok((select count(*) from tools where namespace = 'public') > 0, 'anon sees the public namespace''s tools');
select tests.act_as_user('owner');
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'the owner sees every acme tool, private and unlisted included');
select tests.act_as_user('member');
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'a member sees every acme tool, private and unlisted included');
select tests.act_as_user('stranger');
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/public_tool')$$, 'a stranger sees only the public acme tool');
select tests.act_as_user('service_role');
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'service_role sees every acme tool');
select tests.act_as_admin();
select results_eq($$select ref from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'postgres (the dashboard) sees every acme tool');

-- insert: permission denied for everyone but service_role
select tests.act_as_user('anon');
select throws_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                   values ('acme', 'direct', 'script', 'bash_runtime', 'direct')$$,
  '42501', 'permission denied for table tools', 'anon cannot insert a tool');
select tests.act_as_user('owner');
select throws_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                   values ('acme', 'direct', 'script', 'bash_runtime', 'direct')$$,
  '42501', 'permission denied for table tools', 'the owner cannot insert a tool directly, even into acme');
select tests.act_as_user('member');
select throws_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                   values ('acme', 'direct', 'script', 'bash_runtime', 'direct')$$,
  '42501', 'permission denied for table tools', 'a member cannot insert a tool directly');
select tests.act_as_user('stranger');
select throws_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                   values ('acme', 'direct', 'script', 'bash_runtime', 'direct')$$,
  '42501', 'permission denied for table tools', 'a stranger cannot insert a tool');

-- update
select tests.act_as_user('anon');
select throws_ok($$update tools set description = 'defaced' where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'anon cannot update a tool');
select tests.act_as_user('owner');
select throws_ok($$update tools set description = 'edited' where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'the owner cannot update a tool directly');
select throws_ok($$update tools set is_official = true where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'the owner cannot make a tool official');
select tests.act_as_user('member');
select throws_ok($$update tools set visibility = 'public' where ref = 'acme/private_tool'$$,
  '42501', 'permission denied for table tools', 'a member cannot change a tool''s visibility directly');
select tests.act_as_user('stranger');
select throws_ok($$update tools set description = 'defaced' where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'a stranger cannot update a tool');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$update tools set description = 'curated' where ref = 'acme/public_tool'$$), 1,
  'service_role updates a tool directly');
select is(tests.rows_affected($$update tools set download_count = download_count + 1 where ref = 'acme/private_tool'$$), 1,
  'service_role updates a private tool''s counters');
select throws_ok($$update tools set tool_type = 'api' where ref = 'acme/public_tool'$$,
  '23514', 'tool "acme/public_tool" is a script: its type cannot change to api',
  'service_role cannot change a tool''s type: the trigger refuses it');
select throws_ok($$update tools set tool_id = 'renamed' where ref = 'acme/public_tool'$$,
  '23514', 'tool "acme/public_tool" cannot be renamed or moved to another namespace',
  'service_role cannot rename a tool: the trigger refuses it');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from tools where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'anon cannot delete a tool');
select tests.act_as_user('owner');
select throws_ok($$delete from tools where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'the owner cannot delete a tool directly (delete_tool is the way)');
select tests.act_as_user('member');
select throws_ok($$delete from tools where ref = 'acme/private_tool'$$,
  '42501', 'permission denied for table tools', 'a member cannot delete a tool directly');
select tests.act_as_user('stranger');
select throws_ok($$delete from tools where ref = 'acme/public_tool'$$,
  '42501', 'permission denied for table tools', 'a stranger cannot delete a tool');
select tests.act_as_user('service_role');
select throws_ok($$delete from tools where ref = 'bash_runtime'$$,
  '23503', null, 'service_role cannot delete a runtime other tools execute on');
select is(tests.rows_affected($$delete from tools where ref = 'acme/unlisted_tool'$$), 1,
  'service_role deletes a tool directly');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/unlisted_tool'), 0,
  'deleting a tool takes its versions with it');

-- what the writes above left behind, seen as admin
select tests.act_as_admin();
select results_eq($$select ref, description, visibility, is_official from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool', 'acme private tool', 'private', false),
           ('acme/public_tool', 'curated', 'public', false)$$,
  'only service_role''s writes reached the tools table');
select is((select download_count::int from tools where ref = 'acme/private_tool'), 1,
  'service_role''s counter update is stored');
select ok(exists (select 1 from tools where ref = 'bash_runtime'), 'bash_runtime is still there');
select is((select tool_type from tools where ref = 'acme/public_tool'), 'script', 'the tool kept its type');

select * from finish();
rollback;
