-- resolve_executor_chains_compact: the same chains and errors as resolve_executor_chains_batch,
-- each element (ref@version) once, requests in order, under the caller's visibility.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(8);
select tests.force_tool('loop_a', 'runtime', 'loop_b');
select tests.force_tool('loop_b', 'runtime', 'loop_a');

create temporary table answer on commit drop as
select public.resolve_executor_chains_compact(
         array['hello_world', 'no_such_tool', 'loop_a', 'format_bytes', 'hello_world']) as a;

select results_eq(
  $$ select t ->> 'requested', t -> 'chain' from answer, jsonb_array_elements(a -> 'tools') with ordinality x(t, n) order by n $$,
  $$ values ('hello_world', '["hello_world@1.0.0", "bash_runtime@1.0.0", "subprocess@1.0.0"]'::jsonb),
            ('no_such_tool', null), ('loop_a', null),
            ('format_bytes', '["format_bytes@1.0.0", "python_runtime@1.0.0", "subprocess@1.0.0"]'::jsonb),
            ('hello_world', '["hello_world@1.0.0", "bash_runtime@1.0.0", "subprocess@1.0.0"]'::jsonb) $$,
  'each request keeps its place, a repeated id answers again, chains list depth 0 first');
select results_eq(
  $$ select t ->> 'requested', t ->> 'error', t ->> 'error_code'
       from answer, jsonb_array_elements(a -> 'tools') t where t ? 'error' order by 1 $$,
  $$ values ('loop_a', 'executor cycle: loop_a -> loop_b -> loop_a', 'PT422'),
            ('no_such_tool', 'tool "no_such_tool" not found', 'PT404') $$,
  'a bad id carries the row batch''s error and code, and does not fail the others');
select results_eq(
  $$ select k from answer, jsonb_object_keys(a -> 'elements') k order by k $$,
  $$ values ('bash_runtime@1.0.0'), ('format_bytes@1.0.0'), ('hello_world@1.0.0'),
            ('python_runtime@1.0.0'), ('subprocess@1.0.0') $$,
  'every element is named once, however many chains share it');
select is(
  (select a #> '{elements,hello_world@1.0.0}' from answer),
  (select jsonb_build_object('tool_id', b.tool_id, 'tool_type', b.tool_type, 'executor_id', b.executor_id,
                             'version', b.version, 'content_hash', b.content_hash, 'manifest', b.manifest)
     from public.resolve_executor_chains_batch(array['hello_world']) b where b.depth = 0),
  'an element holds what the row batch returns for it');
select is(public.resolve_executor_chains_compact('{}'), '{"tools": [], "elements": {}}'::jsonb,
  'an empty batch answers empty lists');
select lives_ok($$ select public.resolve_executor_chains_compact(array[null, '', '   ']) $$,
  'nulls and blanks are reported, not raised');

select tests.make_acme();
select tests.act_as_user('stranger');
select is((select a #>> '{tools,0,error_code}' from (select public.resolve_executor_chains_compact(array['acme/private_tool']) a) s),
  'PT404', 'a stranger is told a private tool is not found');
select tests.act_as_user('member');
select ok((select a -> 'elements' ? 'acme/private_tool@1.0.0' from (select public.resolve_executor_chains_compact(array['acme/private_tool']) a) s),
  'a member of its namespace gets the private tool''s element');

select * from finish();
rollback;
