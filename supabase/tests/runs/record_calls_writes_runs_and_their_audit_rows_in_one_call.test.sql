-- record_calls writes a batch of run records and a batch of audit rows in one call, each
-- as record_runs and record_audits would (the caller the database knows, ids as given, in
-- order); one bad record or row refuses both; an empty half writes nothing of its kind;
-- anonymous callers cannot use it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(9);

select tests.act_as_user('owner');
create temporary table got (n bigint generated always as identity, id uuid) on commit drop;
grant all on got to authenticated;
insert into got (id)
select * from public.record_calls(
  jsonb_build_array(
    jsonb_build_object('id', '21111111-2222-4333-8444-555555555555', 'tool_id', 'calls_test/a', 'status', 'success'),
    jsonb_build_object('id', '21111111-2222-4333-8444-555555555556', 'tool_id', 'calls_test/b', 'status', 'error')),
  jsonb_build_array(
    jsonb_build_object('id', '31111111-2222-4333-8444-555555555555', 'session_id', 's', 'tool_id', 'calls_test/a',
                       'decision', 'allowed', 'outcome', 'success', 'run_id', '21111111-2222-4333-8444-555555555555')));

select is((select array_agg(id order by n) from got),
  array['21111111-2222-4333-8444-555555555555', '21111111-2222-4333-8444-555555555556',
        '31111111-2222-4333-8444-555555555555']::uuid[],
  'the runs'' ids come back, then the audit rows'', each in the order given');
select is((select count(*) from public.tool_runs where tool_id like 'calls_test/%'
             and caller = (select kiwi_internal.caller_identity())), 2::bigint,
  'the run records are written in the caller''s name');
select is((select run_id from public.audit_log where id = '31111111-2222-4333-8444-555555555555'
             and caller = (select kiwi_internal.caller_identity())),
  '21111111-2222-4333-8444-555555555555'::uuid, 'the audit row is written in the caller''s name, naming its run');

select throws_ok(
  $$select * from public.record_calls(
      jsonb_build_array(jsonb_build_object('tool_id', 'calls_test/c', 'status', 'success')),
      jsonb_build_array(jsonb_build_object('session_id', 's', 'tool_id', 'calls_test/c', 'decision', 'maybe')))$$,
  '22023', null, 'a bad audit row refuses the call');
select is((select count(*) from public.tool_runs where tool_id = 'calls_test/c'), 0::bigint,
  'and its run records are not stored either');
select throws_ok(
  $$select * from public.record_calls(
      jsonb_build_array(jsonb_build_object('tool_id', 'calls_test/d', 'status', 'maybe')),
      jsonb_build_array(jsonb_build_object('session_id', 's', 'tool_id', 'calls_test/d', 'decision', 'allowed')))$$,
  '22023', null, 'a bad run record refuses the call');
select is((select count(*) from public.audit_log where tool_id = 'calls_test/d'), 0::bigint,
  'and its audit rows are not stored either');

select is((select count(*) from public.record_calls('[]',
  jsonb_build_array(jsonb_build_object('session_id', 's', 'tool_id', 'calls_test/e', 'decision', 'allowed'))))::bigint,
  1::bigint, 'an empty half writes nothing of its kind, the other half is written');

select tests.act_as('anon');
select throws_ok(
  $$select * from public.record_calls('[]', jsonb_build_array(
      jsonb_build_object('session_id', 's', 'tool_id', 'calls_test/f', 'decision', 'allowed')))$$,
  '42501', null, 'anonymous callers cannot use it (they write audit rows through record_audits, within a budget)');

select * from finish();
rollback;
