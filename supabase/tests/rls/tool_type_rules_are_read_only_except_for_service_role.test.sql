-- tool_type_rules × {select, insert, update, delete} × {anon, owner, member, stranger,
-- service_role}: the executor matrix is readable by everyone and written by
-- service_role alone.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(25);
select tests.make_acme();

-- select: the ten tool types, for everyone
select tests.act_as_user('anon');
select results_eq($$select tool_type from tool_type_rules order by 1$$,
  $$values ('api'), ('composite'), ('directive'), ('knowledge'), ('mcp_server'), ('mcp_tool'),
           ('primitive'), ('runtime'), ('script'), ('thread')$$,
  'anon reads the executor matrix');
select tests.act_as_user('owner');
select is((select count(*)::int from tool_type_rules), 10, 'the owner reads the executor matrix');
select tests.act_as_user('member');
select is((select count(*)::int from tool_type_rules), 10, 'a member reads the executor matrix');
select tests.act_as_user('stranger');
select is((select count(*)::int from tool_type_rules), 10, 'a stranger reads the executor matrix');
select tests.act_as_user('service_role');
select is((select count(*)::int from tool_type_rules), 10, 'service_role reads the executor matrix');

-- insert
select tests.act_as_user('anon');
select throws_ok($$insert into tool_type_rules (tool_type, requires_executor, description) values ('wasm', false, 'x')$$,
  '42501', 'permission denied for table tool_type_rules', 'anon cannot add a tool type');
select tests.act_as_user('owner');
select throws_ok($$insert into tool_type_rules (tool_type, requires_executor, description) values ('wasm', false, 'x')$$,
  '42501', 'permission denied for table tool_type_rules', 'the owner cannot add a tool type');
select tests.act_as_user('member');
select throws_ok($$insert into tool_type_rules (tool_type, requires_executor, description) values ('wasm', false, 'x')$$,
  '42501', 'permission denied for table tool_type_rules', 'a member cannot add a tool type');
select tests.act_as_user('stranger');
select throws_ok($$insert into tool_type_rules (tool_type, requires_executor, description) values ('wasm', false, 'x')$$,
  '42501', 'permission denied for table tool_type_rules', 'a stranger cannot add a tool type');
select tests.act_as_user('service_role');
select lives_ok($$insert into tool_type_rules (tool_type, requires_executor, executor_types, description)
                  values ('wasm', true, '{runtime}', 'WebAssembly modules run by a runtime.')$$,
  'service_role adds a tool type');

-- update
select tests.act_as_user('anon');
select throws_ok($$update tool_type_rules set executor_types = '{primitive,runtime}' where tool_type = 'script'$$,
  '42501', 'permission denied for table tool_type_rules', 'anon cannot change the executor matrix');
select tests.act_as_user('owner');
select throws_ok($$update tool_type_rules set executor_types = '{primitive,runtime}' where tool_type = 'script'$$,
  '42501', 'permission denied for table tool_type_rules', 'the owner cannot change the executor matrix');
select tests.act_as_user('member');
select throws_ok($$update tool_type_rules set terminal_primitive = null where tool_type = 'api'$$,
  '42501', 'permission denied for table tool_type_rules', 'a member cannot change the executor matrix');
select tests.act_as_user('stranger');
select throws_ok($$update tool_type_rules set description = 'x' where tool_type = 'script'$$,
  '42501', 'permission denied for table tool_type_rules', 'a stranger cannot change the executor matrix');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$update tool_type_rules set description = 'WebAssembly components.' where tool_type = 'wasm'$$), 1,
  'service_role changes the executor matrix');
select throws_ok($$update tool_type_rules set requires_executor = false where tool_type = 'wasm'$$,
  '23514', 'new row for relation "tool_type_rules" violates check constraint "executor_types_match"',
  'service_role still meets the matrix''s own constraints');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from tool_type_rules where tool_type = 'thread'$$,
  '42501', 'permission denied for table tool_type_rules', 'anon cannot remove a tool type');
select tests.act_as_user('owner');
select throws_ok($$delete from tool_type_rules where tool_type = 'thread'$$,
  '42501', 'permission denied for table tool_type_rules', 'the owner cannot remove a tool type');
select tests.act_as_user('member');
select throws_ok($$delete from tool_type_rules where tool_type = 'thread'$$,
  '42501', 'permission denied for table tool_type_rules', 'a member cannot remove a tool type');
select tests.act_as_user('stranger');
select throws_ok($$delete from tool_type_rules where tool_type = 'thread'$$,
  '42501', 'permission denied for table tool_type_rules', 'a stranger cannot remove a tool type');
select tests.act_as_user('service_role');
select throws_ok($$delete from tool_type_rules where tool_type = 'script'$$,
  '23503', null, 'service_role cannot remove a tool type that tools have');
select is(tests.rows_affected($$delete from tool_type_rules where tool_type = 'wasm'$$), 1,
  'service_role removes an unused tool type');

-- what is left, seen as admin
select tests.act_as_admin();
select results_eq($$select tool_type, requires_executor, executor_types, terminal_primitive from tool_type_rules
                     where tool_type in ('api', 'script', 'thread', 'wasm') order by 1$$,
  $$values ('api', true, '{primitive,runtime}'::text[], 'http_client'),
           ('script', true, '{runtime}'::text[], null),
           ('thread', true, '{runtime}'::text[], null)$$,
  'the executor matrix is as the migration made it');
select is((select description from tool_type_rules where tool_type = 'script'), 'Files run by a runtime.',
  'nobody but service_role changed a description');
select is((select count(*)::int from tool_type_rules), 10, 'the ten tool types remain');

select * from finish();
rollback;
