-- tool_runs × {select, insert, update, delete} × {anon, owner, member, stranger,
-- service_role}, and postgres. Callers read only the runs they recorded; admins read
-- all. Nobody writes the table directly: runs come through record_run, never change,
-- and only service_role deletes them (retention). The dashboard views apply the same
-- rules, being security_invoker. Tool ids start with runs_test/ so that runs recorded
-- by others do not get in the way.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(37);

-- one run per caller, and the stranger also runs the owner's tool
select tests.act_as_user('owner');
select public.record_run('{"tool_id": "runs_test/owner_tool", "status": "success", "duration_ms": 10}');
select tests.act_as_user('member');
select public.record_run('{"tool_id": "runs_test/member_tool", "status": "error", "error_summary": "member failed"}');
select tests.act_as_user('stranger');
select public.record_run('{"tool_id": "runs_test/stranger_tool", "status": "timeout"}');
select public.record_run('{"tool_id": "runs_test/owner_tool", "status": "error", "error_summary": "stranger failed"}');
select tests.act_as_user('service_role');
select public.record_run('{"tool_id": "runs_test/service_tool", "status": "success"}');
select tests.act_as_admin();
select public.record_run('{"tool_id": "runs_test/direct_tool", "status": "success"}');

-- select
select tests.act_as_user('anon');
select throws_ok($$select * from tool_runs$$, '42501', 'permission denied for table tool_runs', 'anon reads no runs');
select tests.act_as_user('owner');
select results_eq($$select tool_id, status from tool_runs where tool_id like 'runs_test/%' order by 1, 2$$,
  $$values ('runs_test/owner_tool', 'success')$$, 'the owner reads only the run the owner recorded');
select tests.act_as_user('member');
select results_eq($$select tool_id, status from tool_runs where tool_id like 'runs_test/%' order by 1, 2$$,
  $$values ('runs_test/member_tool', 'error')$$, 'a member reads only the member''s own run');
select tests.act_as_user('stranger');
select results_eq($$select tool_id, status from tool_runs where tool_id like 'runs_test/%' order by 1, 2$$,
  $$values ('runs_test/owner_tool', 'error'), ('runs_test/stranger_tool', 'timeout')$$,
  'a stranger reads only the stranger''s own runs, even of a tool others ran');
select is_empty($$select 1 from tool_runs where caller <> tests.stranger_id()::text$$,
  'a stranger never sees another caller''s run, whoever recorded it');
select is_empty($$select 1 from tool_runs where caller = tests.owner_id()::text$$,
  'asking for the owner''s runs by caller gives a stranger nothing');
select tests.act_as_user('service_role');
select results_eq($$select tool_id, status from tool_runs where tool_id like 'runs_test/%' order by 1, 2$$,
  $$values ('runs_test/direct_tool', 'success'), ('runs_test/member_tool', 'error'), ('runs_test/owner_tool', 'error'),
           ('runs_test/owner_tool', 'success'), ('runs_test/service_tool', 'success'), ('runs_test/stranger_tool', 'timeout')$$,
  'service_role reads every run');
select tests.act_as_admin();
select is((select count(*)::int from tool_runs where tool_id like 'runs_test/%'), 6, 'postgres reads every run');

-- insert: only through record_run
select tests.act_as_user('anon');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role) values ('runs_test/x', 'success', 'me', 'anon')$$,
  '42501', 'permission denied for table tool_runs', 'anon cannot insert a run');
select tests.act_as_user('owner');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role) values ('runs_test/x', 'success', 'me', 'authenticated')$$,
  '42501', 'permission denied for table tool_runs', 'the owner cannot insert a run directly');
select tests.act_as_user('member');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role) values ('runs_test/x', 'success', tests.owner_id()::text, 'authenticated')$$,
  '42501', 'permission denied for table tool_runs', 'a member cannot insert a run in another''s name');
select tests.act_as_user('stranger');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role) values ('runs_test/x', 'success', 'me', 'authenticated')$$,
  '42501', 'permission denied for table tool_runs', 'a stranger cannot insert a run directly');
select tests.act_as_user('service_role');
select throws_ok($$insert into tool_runs (tool_id, status, caller, caller_role) values ('runs_test/x', 'success', 'me', 'service_role')$$,
  '42501', 'permission denied for table tool_runs', 'service_role records through record_run too, never directly');

-- update: nobody, not even postgres
select tests.act_as_user('anon');
select throws_ok($$update tool_runs set status = 'success' where tool_id like 'runs_test/%'$$,
  '42501', 'permission denied for table tool_runs', 'anon cannot update a run');
select tests.act_as_user('owner');
select throws_ok($$update tool_runs set status = 'error' where tool_id = 'runs_test/owner_tool'$$,
  '42501', 'permission denied for table tool_runs', 'the owner cannot rewrite the owner''s own run');
select tests.act_as_user('member');
select throws_ok($$update tool_runs set error_summary = null where tool_id = 'runs_test/member_tool'$$,
  '42501', 'permission denied for table tool_runs', 'a member cannot hide the member''s own error');
select tests.act_as_user('stranger');
select throws_ok($$update tool_runs set caller = tests.stranger_id()::text where tool_id like 'runs_test/%'$$,
  '42501', 'permission denied for table tool_runs', 'a stranger cannot take over runs');
select tests.act_as_user('service_role');
select throws_ok($$update tool_runs set status = 'success' where tool_id like 'runs_test/%'$$,
  '42501', 'permission denied for table tool_runs', 'service_role cannot update a run');
select tests.act_as_admin();
select throws_ok($$update tool_runs set status = 'success' where tool_id = 'runs_test/member_tool'$$,
  '23514', null, 'postgres cannot update a run either: runs are append-only');
select matches(tests.error_of($$update tool_runs set status = 'success' where tool_id = 'runs_test/member_tool'$$),
  '^run records are append-only', 'the refusal says runs are append-only');

-- delete: service_role only
select tests.act_as_user('anon');
select throws_ok($$delete from tool_runs where tool_id like 'runs_test/%'$$,
  '42501', 'permission denied for table tool_runs', 'anon cannot delete runs');
select tests.act_as_user('owner');
select throws_ok($$delete from tool_runs where tool_id = 'runs_test/owner_tool'$$,
  '42501', 'permission denied for table tool_runs', 'the owner cannot delete the owner''s own run');
select tests.act_as_user('member');
select throws_ok($$delete from tool_runs where tool_id = 'runs_test/member_tool'$$,
  '42501', 'permission denied for table tool_runs', 'a member cannot delete the member''s own run');
select tests.act_as_user('stranger');
select throws_ok($$delete from tool_runs where tool_id like 'runs_test/%'$$,
  '42501', 'permission denied for table tool_runs', 'a stranger cannot delete runs');

-- the views: RLS applies to whoever reads them
select tests.act_as_user('anon');
select throws_ok($$select * from recent_runs$$, '42501', 'permission denied for view recent_runs', 'anon cannot read recent_runs');
select throws_ok($$select * from run_summary$$, '42501', 'permission denied for view run_summary', 'anon cannot read run_summary');
select tests.act_as_user('owner');
select results_eq($$select tool_id, status, caller from recent_runs where tool_id like 'runs_test/%'$$,
  $$values ('runs_test/owner_tool', 'success', tests.owner_id()::text)$$, 'recent_runs shows the owner only the owner''s run');
select results_eq($$select tool_id, runs, errors, last_error from run_summary where tool_id like 'runs_test/%'$$,
  $$values ('runs_test/owner_tool', 1::bigint, 0::bigint, null::text)$$,
  'run_summary counts only the owner''s runs of the owner''s tool, not the stranger''s');
select tests.act_as_user('member');
select results_eq($$select tool_id, runs, errors, last_error from run_summary where tool_id like 'runs_test/%'$$,
  $$values ('runs_test/member_tool', 1::bigint, 1::bigint, 'member failed')$$, 'run_summary shows a member only the member''s runs');
select tests.act_as_user('stranger');
select is_empty($$select 1 from recent_runs where caller <> tests.stranger_id()::text$$,
  'recent_runs never shows a stranger another caller''s run');
select results_eq($$select tool_id, runs, last_error from run_summary where tool_id like 'runs_test/%' order by 1$$,
  $$values ('runs_test/owner_tool', 1::bigint, 'stranger failed'), ('runs_test/stranger_tool', 1::bigint, null::text)$$,
  'run_summary shows a stranger only the stranger''s runs, and not the owner''s success');
select tests.act_as_user('service_role');
select results_eq($$select tool_id, runs from run_summary where tool_id like 'runs_test/%' order by 1$$,
  $$values ('runs_test/direct_tool', 1::bigint), ('runs_test/member_tool', 1::bigint), ('runs_test/owner_tool', 2::bigint),
           ('runs_test/service_tool', 1::bigint), ('runs_test/stranger_tool', 1::bigint)$$,
  'run_summary shows service_role every caller''s runs');
select is((select count(*)::int from recent_runs where tool_id like 'runs_test/%'), 6, 'recent_runs shows service_role every run');
select tests.act_as_admin();
select is((select count(distinct caller)::int from recent_runs where tool_id like 'runs_test/%'), 5,
  'recent_runs shows postgres the runs of all five callers');

-- service_role deletes old runs (retention); what the others could not touch is intact until then
select is((select count(*)::int from tool_runs where tool_id like 'runs_test/%' and status = 'error'), 2,
  'the refused updates and deletes changed nothing');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$delete from tool_runs where tool_id like 'runs_test/%'$$), 6,
  'service_role deletes runs');
select tests.act_as_admin();
select is((select count(*)::int from tool_runs where tool_id like 'runs_test/%'), 0, 'the deleted runs are gone');

select * from finish();
rollback;
