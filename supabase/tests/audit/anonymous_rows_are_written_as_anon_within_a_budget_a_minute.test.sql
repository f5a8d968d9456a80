-- Every call leaves an audit row, an anonymous one too: anon writes audit rows, in the name
-- role:anon whatever its claims say, and all anonymous callers together at most
-- registry_limits.anon_audit_rows_per_minute a minute. A batch that does not fit is refused
-- whole (PT429), saying when to retry; the gate refuses anonymous calls while the minute's
-- rows are used up (so a call that runs finds room for its row), and only anonymous ones.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
delete from kiwi_internal.anon_audit_window;
select plan(15);

update registry_limits set value = '3' where name = 'anon_audit_rows_per_minute';
create function tests.entry(p_tool text) returns jsonb language sql as $$
  select jsonb_build_object('session_id', 'anon-s', 'tool_id', p_tool, 'decision', 'refused', 'reason', 'r')
$$;
create function tests.gate() returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('tool_id', 'hello_world', 'params_sha256', repeat('a', 64)))
$$;
grant execute on function tests.entry(text), tests.gate() to anon, authenticated, service_role;

-- anon with claims that name someone: its rows are still role:anon's
select tests.act_as('anon', tests.owner_id());
select is(tests.gate() ->> 'allowed', 'true', 'the gate lets an anonymous call through while rows fit');
select is(tests.gate() #>> '{limits,0,scope}', 'anonymous_audit',
  'its answer lists the anonymous budget among the limits (so it is never remembered as untouched)');
select lives_ok($$select public.record_audit(tests.entry('audit_anon/one'))$$, 'anon writes one row');
select is((select count(*)::int from public.record_audits(jsonb_build_array(tests.entry('audit_anon/two'), tests.entry('audit_anon/two')))),
  2, 'and a batch of two: three this minute');
select throws_ok($$select public.record_audits(jsonb_build_array(tests.entry('audit_anon/four')))$$, 'PT429', null,
  'a fourth row does not fit: refused');
select matches(tests.error_of($$select public.record_audit(tests.entry('audit_anon/four'))$$),
  'anonymous callers may write 3 audit rows a minute together \(registry_limits.anon_audit_rows_per_minute\); 3 are written this minute, and 1 more do not fit; retry in',
  'saying why, naming the limit and when to retry');
select is(tests.gate() ->> 'kind', 'rate_limited', 'the gate now refuses anonymous calls ...');
select matches(tests.gate() ->> 'reason', 'anon_audit_rows_per_minute', '... naming the budget');
select ok((tests.gate() ->> 'retry_after_s')::numeric between 0 and 60, '... and when to retry');

select tests.act_as_user('stranger');
select is(tests.gate() ->> 'allowed', 'true', 'a signed-in caller is not counted, nor refused');
select lives_ok($$select public.record_audit(tests.entry('audit_anon/signed_in'))$$, 'and writes its rows');

select tests.act_as_admin();
select results_eq($$select tool_id, caller, caller_role from audit_log where tool_id like 'audit_anon/%' order by tool_id, caller$$,
  $$values ('audit_anon/one', 'role:anon', 'anon'), ('audit_anon/signed_in', tests.stranger_id()::text, 'authenticated'),
           ('audit_anon/two', 'role:anon', 'anon'), ('audit_anon/two', 'role:anon', 'anon')$$,
  'anonymous rows are role:anon''s, whatever the claims said; nothing of a refused batch was stored');
select is((select rows_written from kiwi_internal.anon_audit_window), 3, 'the window counts the rows written');

-- a new minute: room again
update kiwi_internal.anon_audit_window set window_start = window_start - interval '1 minute';
select tests.act_as_user('anon');
select lives_ok($$select public.record_audit(tests.entry('audit_anon/next'))$$, 'the next minute has room again');
select tests.act_as_admin();
delete from registry_limits where name = 'anon_audit_rows_per_minute';
select tests.act_as_user('anon');
select is((select count(*)::int from public.record_audits(
  (select jsonb_agg(tests.entry('audit_anon/unbounded')) from generate_series(1, 5)))), 5,
  'deleting the registry_limits row lifts the bound');

select * from finish();
rollback;
