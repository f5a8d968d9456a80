-- record_runs writes many run records in one call, in order, each as record_run would;
-- a record may carry the id the client chose, so a record written behind its run is
-- known by that id at once. One bad record refuses the whole batch.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(10);

select tests.act_as_user('owner');
create temporary table got (n bigint generated always as identity, id uuid) on commit drop;
grant all on got to authenticated;
insert into got (id)
select * from public.record_runs(jsonb_build_array(
  jsonb_build_object('id', '11111111-2222-4333-8444-555555555555', 'tool_id', 'runs_test/batch_a',
                     'status', 'success', 'duration_ms', 5, 'started_at', '2026-01-02T03:04:05Z'),
  jsonb_build_object('tool_id', 'runs_test/batch_b', 'status', 'error', 'error_summary', 'boom', 'source', 'user')));

select is((select count(*) from got), 2::bigint, 'record_runs returns one id per record');
select is((select id from got where n = 1), '11111111-2222-4333-8444-555555555555'::uuid,
  'a record keeps the id its client chose');
select is((select tool_id from public.tool_runs where id = (select id from got where n = 2)), 'runs_test/batch_b',
  'records are written in the order given, ids returned in that order');
select is((select finished_at from public.tool_runs where id = '11111111-2222-4333-8444-555555555555'),
  '2026-01-02T03:04:05.005Z'::timestamptz, 'finished_at follows from started_at and the duration');
select is((select caller from public.tool_runs where id = (select id from got where n = 2)),
  (select kiwi_internal.caller_identity()), 'each record of a batch names its caller as the database knows it');

select throws_ok(
  $$select * from public.record_runs(jsonb_build_array(
      jsonb_build_object('tool_id', 'runs_test/batch_c', 'status', 'success'),
      jsonb_build_object('tool_id', 'runs_test/batch_d', 'status', 'maybe')))$$,
  '22023', null, 'one bad record refuses the batch');
select is((select count(*) from public.tool_runs where tool_id = 'runs_test/batch_c'), 0::bigint,
  'nothing of a refused batch is stored');
select is((select array_agg(source order by n) from got join public.tool_runs r using (id)), array['registry', 'user'],
  'each record says where its tool came from (registry unless it says a local space)');
select throws_ok(
  $$select * from public.record_runs(jsonb_build_array(jsonb_build_object('tool_id', 'runs_test/batch_e', 'status', 'success', 'source', 'disk')))$$,
  '22023', 'invalid run record: source: one of registry, project, user (got "disk")', 'a bad source is refused by name');
select throws_ok($$select * from public.record_runs(jsonb_build_object('id', 'not-a-uuid'))$$,
  '22023', 'invalid run records: must be a JSON array of run records', 'a batch must be an array');

select * from finish();
rollback;
