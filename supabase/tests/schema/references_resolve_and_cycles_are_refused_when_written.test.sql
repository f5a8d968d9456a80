begin;
\ir ../_setup.sql
select plan(9);

select throws_ok($$ select tests.publish('dangling', 'script', 'no_such_runtime') $$, 'PT404',
  'executor "no_such_runtime" of tool "dangling" not found', 'publishing on an unknown executor is refused');
select throws_ok($$ insert into tools (tool_id, tool_type, executor_id, name) values ('d2', 'script', 'no_such_runtime', 'x') $$,
  '23503', 'executor "no_such_runtime" of tool "d2" does not exist', 'a dangling executor is refused at the table');

select throws_ok($$ delete from tools where ref = 'bash_runtime' $$, '23503',
  'cannot remove tool "bash_runtime": other tools execute on it: git_checkpoint, hello_world',
  'removing a tool others execute on is refused, naming them');
select throws_ok($$ select delete_tool('subprocess') $$, '23503', null,
  'delete_tool refuses too');

-- an older version still executing on a runtime keeps it alive
select tests.publish('old_rt', 'runtime', 'subprocess');
select tests.publish('moves', 'runtime', 'old_rt', '1.0.0');
select tests.publish('moves', 'runtime', 'subprocess', '2.0.0');
select throws_ok($$ delete from tools where ref = 'old_rt' $$, '23503',
  'cannot remove tool "old_rt": other tools execute on it: moves@1.0.0',
  'a version that still executes on a tool is named too');

select tests.publish('unused_rt', 'runtime', 'subprocess');
select lives_ok($$ select delete_tool('unused_rt') $$, 'a tool nothing executes on can be removed');
select is((select count(*)::int from tools where ref = 'unused_rt'), 0, 'and it is gone, with its versions');

-- cycles: c1 -> subprocess, c2 -> c1; making c1 execute on c2 would close a loop
select tests.publish('c1', 'runtime', 'subprocess');
select tests.publish('c2', 'runtime', 'c1');
select throws_ok($$ select tests.publish('c1', 'runtime', 'c2', '2.0.0') $$, '23514',
  'executor cycle: c1 -> c2 -> c1', 'publishing a version that closes a cycle is refused');
select throws_ok($$ update tools set executor_id = 'c1' where ref = 'c1' $$, '23514',
  'executor cycle: c1 -> c1', 'a tool cannot execute on itself');

select * from finish();
rollback;
