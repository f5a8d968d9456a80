begin;
\ir ../_setup.sql
select plan(6);
select tests.force_tool('loop_a', 'runtime', 'loop_b');
select tests.force_tool('loop_b', 'runtime', 'loop_a');

create temporary table batch on commit drop as
select * from resolve_executor_chains_batch(array['hello_world', 'no_such_tool', 'loop_a', 'format_bytes', 'hello_world']);

select results_eq(
  $$ select requested_tool_id, depth, tool_id from batch where error is null order by requested_tool_id, depth $$,
  $$ values ('format_bytes', 0, 'format_bytes'), ('format_bytes', 1, 'python_runtime'), ('format_bytes', 2, 'subprocess'),
            ('hello_world', 0, 'hello_world'), ('hello_world', 0, 'hello_world'),
            ('hello_world', 1, 'bash_runtime'), ('hello_world', 1, 'bash_runtime'),
            ('hello_world', 2, 'subprocess'), ('hello_world', 2, 'subprocess') $$,
  'good ids resolve fully, a repeated id once per request');
select results_eq(
  $$ select requested_tool_id, depth, tool_id, error from batch where error is not null order by requested_tool_id $$,
  $$ values ('loop_a', null::int, null::text, 'executor cycle: loop_a -> loop_b -> loop_a'),
            ('no_such_tool', null::int, null::text, 'tool "no_such_tool" not found') $$,
  'each bad id gives one row with its error and a null depth');
select is((select count(*)::int from batch), 11, 'nothing else is returned');
select is((select count(*)::int from resolve_executor_chains_batch('{}')), 0, 'an empty batch returns no rows');
select results_eq(
  $$ select requested_tool_id, tool_id from resolve_executor_chains_batch(array['http_echo']) $$,
  $$ values ('http_echo', 'http_echo'), ('http_echo', 'http_client') $$,
  'rows come back in request order, then depth order');
select lives_ok($$ select * from resolve_executor_chains_batch(array[null, '', '   ']) $$,
  'nulls and blanks in a batch are reported, not raised');

select * from finish();
rollback;
