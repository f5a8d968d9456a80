-- resolve_executor_chains_compact: the same chains and errors as resolve_executor_chains_batch,
-- each element (ref@version) once, requests in order, under the caller's visibility.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(9);
select tests.force_tool('loop_a', 'runtime', 'loop_b');
select tests.force_tool('loop_b', 'runtime', 'loop_a');

create temporary table answer on commit drop as
select public.resolve_executor_chains_compact(
         array['hello_world', 'no_such_tool', 'loop_a', 'format_bytes', 'hello_world'])::jsonb as a;

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
select is(public.resolve_executor_chains_compact('{}')::jsonb, '{"tools": [], "elements": {}}'::jsonb,
  'an empty batch answers empty lists');
select lives_ok($$ select public.resolve_executor_chains_compact(array[null, '', '   ']) $$,
  'nulls and blanks are reported, not raised');

-- every tool of the seed and every kind of broken chain: the compact answer says what the
-- row batch says (its chains element by element, its errors word for word)
select tests.force_tool('orphan', 'script', 'ghost_runtime');
select tests.force_tool('on_loop', 'script', 'loop_a');
select tests.publish('r1', 'runtime', 'subprocess');
select tests.publish('r' || i, 'runtime', 'r' || (i - 1)) from generate_series(2, 10) i;
select tests.force_tool('too_deep', 'script', 'r10');
select tests.force_tool('dead_end', 'script', 'r_alone');
select tests.force_tool('r_alone', 'runtime', null);
create temporary table every_id on commit drop as
select array_agg(ref order by ref) || array['no_such_tool'] as ids from public.tools;
create temporary table rows_said on commit drop as
select * from public.resolve_executor_chains_batch((select ids from every_id));
select is(
  (select jsonb_build_object(
            'tools', (select jsonb_agg(t - 'error_code' order by t ->> 'requested')
                        from jsonb_array_elements(public.resolve_executor_chains_compact((select ids from every_id))::jsonb -> 'tools') t),
            'elements', public.resolve_executor_chains_compact((select ids from every_id))::jsonb -> 'elements')),
  (select jsonb_build_object(
            'tools', (select jsonb_agg(x.entry order by x.requested_tool_id) from (
                        select r.requested_tool_id,
                               case when bool_or(r.error is not null)
                                    then jsonb_build_object('requested', r.requested_tool_id, 'error', max(r.error))
                                    else jsonb_build_object('requested', r.requested_tool_id,
                                           'chain', jsonb_agg(r.tool_id || '@' || r.version order by r.depth)) end as entry
                          from rows_said r group by r.requested_tool_id) x),
            'elements', (select jsonb_object_agg(e.tool_id || '@' || e.version, jsonb_build_object(
                                  'tool_id', e.tool_id, 'tool_type', e.tool_type, 'executor_id', e.executor_id,
                                  'version', e.version, 'content_hash', e.content_hash, 'manifest', e.manifest))
                           from (select distinct on (tool_id, version) * from rows_said where error is null) e))),
  'over the whole registry and every broken chain, the compact answer is the row batch''s, each element once');

select tests.make_acme();
select tests.act_as_user('stranger');
select is((select a #>> '{tools,0,error_code}' from (select public.resolve_executor_chains_compact(array['acme/private_tool'])::jsonb a) s),
  'PT404', 'a stranger is told a private tool is not found');
select tests.act_as_user('member');
select ok((select a -> 'elements' ? 'acme/private_tool@1.0.0' from (select public.resolve_executor_chains_compact(array['acme/private_tool'])::jsonb a) s),
  'a member of its namespace gets the private tool''s element');

select * from finish();
rollback;
