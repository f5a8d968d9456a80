begin;
\ir ../_setup.sql
select plan(11);

select results_eq(
  $$ select tool_type from tool_type_rules order by tool_type $$,
  $$ values ('api'), ('composite'), ('directive'), ('knowledge'), ('mcp_server'), ('mcp_tool'),
            ('primitive'), ('runtime'), ('script'), ('thread') $$,
  'there are exactly the ten tool types');

select throws_ok($$ select tests.publish('bad_script', 'script', 'subprocess') $$, '23514',
  'tool "bad_script" (script) cannot execute on "subprocess" (primitive): a script executes on runtime',
  'a script cannot run directly on a primitive');
select throws_ok($$ select tests.publish('bad_tool', 'mcp_tool', 'bash_runtime') $$, '23514',
  'tool "bad_tool" (mcp_tool) cannot execute on "bash_runtime" (runtime): a mcp_tool executes on mcp_server',
  'an mcp_tool runs only on an mcp_server');
select lives_ok($$ select tests.publish('fs.read', 'mcp_tool', 'filesystem_mcp') $$,
  'an mcp_tool runs on an mcp_server');
select throws_ok($$ select tests.publish('bad_api', 'api', 'subprocess') $$, 'PT422',
  'tool "bad_api" is a api: its chain must end in http_client, but ends in subprocess (chain: bad_api -> subprocess)',
  'an api must end in http_client');
select throws_ok($$ select tests.publish('on_knowledge', 'script', 'kiwi_tool_authoring') $$, '23514',
  'tool "on_knowledge" (script) cannot execute on "kiwi_tool_authoring" (knowledge): a script executes on runtime',
  'nothing executes on knowledge');

-- the triggers hold even for admins writing the tables directly
select throws_ok($$ insert into tools (tool_id, tool_type, name) values ('no_exec', 'runtime', 'x') $$, '23502',
  'tool "no_exec" is a runtime and needs an executor (one of: primitive, runtime)',
  'a runtime without an executor is refused at the table');
select throws_ok($$ insert into tools (tool_id, tool_type, executor_id, name) values ('prim2', 'primitive', 'subprocess', 'x') $$, '23514',
  'tool "prim2" is a primitive: it has no executor, but names "subprocess"',
  'a primitive with an executor is refused at the table');
select throws_ok($$ insert into tools (tool_id, tool_type, executor_id, name) values ('k2', 'knowledge', 'subprocess', 'x') $$, '23514',
  'tool "k2" is a knowledge: it has no executor, but names "subprocess"',
  'knowledge with an executor is refused at the table');
select throws_ok($$ insert into tools (tool_id, tool_type, executor_id, name) values ('s2', 'script', 'subprocess', 'x') $$, '23514',
  null, 'the matrix is enforced on direct inserts');
select throws_ok($$ update tools set tool_type = 'api' where ref = 'hello_world' $$, '23514',
  'tool "hello_world" is a script: its type cannot change to api', 'a tool keeps its type');

select * from finish();
rollback;
