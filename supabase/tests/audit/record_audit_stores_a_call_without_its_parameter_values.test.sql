-- record_audit writes one row per call, allowed or refused: the tool, the exact version
-- and content_hash, the decision and why, the session and directive, how long it took
-- and how it ended, and the parameters' hash and size (never their values). Who asked
-- is set by the database. Bad entries are refused with SQLSTATE 22023, naming each
-- field. Tool ids start with audit_test/ so that rows written by others do not matter.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(21);

create function tests.refusal(p_entry jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_audit(p_entry);
  return 'recorded';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;
create function tests.audit_row(p_id uuid) returns public.audit_log
  language sql as $$ select * from public.audit_log where id = p_id $$;
create temporary table ids (name text primary key, id uuid) on commit drop;
grant all on ids to authenticated, service_role;

select columns_are('public', 'audit_log',
  array['id', 'at', 'session_id', 'directive', 'action', 'tool_id', 'server', 'version', 'content_hash',
        'decision', 'reason', 'retry_after_s', 'duration_ms', 'outcome', 'params_sha256', 'params_size',
        'run_id', 'caller', 'caller_role'],
  'an audit row has no column for parameter values or outputs: only their hash and size');

-- an allowed call, every field
select tests.act_as_user('owner');
insert into ids
select 'allowed', public.record_audit(jsonb_build_object(
  'session_id', 'audit-session-1', 'directive', 'audit_test/triage', 'action', 'run',
  'tool_id', 'public/audit_test_tool', 'server', 'public/audit_test_server', 'version', '1.2.3',
  'content_hash', repeat('ab', 32), 'decision', 'allowed', 'duration_ms', 12.5, 'outcome', 'success',
  'params_sha256', repeat('0f', 32), 'params_size', 17));
select isnt((select id from ids where name = 'allowed'), null, 'record_audit returns the new row''s id');
select tests.act_as_admin();
select results_eq(
  $$select session_id, directive, action, tool_id, server, version, content_hash, decision, reason, duration_ms,
           outcome, params_sha256, params_size
      from tests.audit_row((select id from ids where name = 'allowed'))$$,
  $$values ('audit-session-1', 'audit_test/triage', 'run', 'audit_test_tool', 'audit_test_server', '1.2.3',
            repeat('ab', 32), 'allowed', null::text, 12.5::double precision, 'success', repeat('0f', 32), 17)$$,
  'every field of an allowed call is stored as given, references normalised');
select results_eq(
  $$select caller, caller_role from tests.audit_row((select id from ids where name = 'allowed'))$$,
  $$values (tests.owner_id()::text, 'authenticated')$$,
  'the database sets who asked');

-- a refused call
select tests.act_as_user('service_role');
insert into ids
select 'refused', public.record_audit(jsonb_build_object(
  'session_id', 'audit-session-1', 'tool_id', 'audit_test_tool', 'decision', 'refused',
  'reason', 'rate limit: tool audit_test_tool allows 1 call(s) per 60 s', 'retry_after_s', 42.5));
select tests.act_as_admin();
select results_eq(
  $$select decision, reason, retry_after_s, outcome, caller
      from tests.audit_row((select id from ids where name = 'refused'))$$,
  $$values ('refused', 'rate limit: tool audit_test_tool allows 1 call(s) per 60 s', 42.5::numeric, null::text,
            'role:service_role')$$,
  'a refused call is a row with its reason and when to retry, and no outcome');

-- refusals, each naming its field
select tests.act_as_user('owner');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "allowed", "params": {"password": "hunter2"}}'),
  'params: unknown field', 'parameter values cannot be stored: an unknown field is refused');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "allowed", "caller": "someone"}'),
  'caller: unknown field', 'who asked cannot be given');
select matches(tests.refusal('{"tool_id": "audit_test/x", "decision": "allowed"}'),
  'session_id: required', 'session_id is required');
select matches(tests.refusal('{"session_id": "s", "decision": "allowed"}'),
  'tool_id: required', 'tool_id is required');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "maybe"}'),
  'decision: required, one of allowed, refused \(got "maybe"\)', 'an unknown decision is refused, quoting it');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "refused"}'),
  'reason: required when the decision is refused', 'a refusal needs a reason');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "refused", "reason": "r", "outcome": "success"}'),
  'outcome: a refused call did not run', 'a refused call has no outcome');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "allowed", "outcome": "fine"}'),
  'outcome: one of success, error, timeout', 'an unknown outcome is refused');
select matches(tests.refusal(jsonb_build_object('session_id', 's', 'tool_id', 'audit_test/x', 'decision', 'allowed', 'params_sha256', 'abc')),
  'params_sha256: must be a sha256', 'a bad params_sha256 is refused');
select matches(tests.refusal('{"session_id": "s", "tool_id": "audit_test/x", "decision": "allowed", "duration_ms": -1, "params_size": 1.5}'),
  'duration_ms: must be a number, 0 or more.*params_size: must be a whole number',
  'every bad field is named in one refusal');
select matches(tests.refusal('[]'), 'entry: must be a JSON object', 'an entry must be an object');
select tests.act_as_admin();
select is((select count(*)::int from audit_log where tool_id = 'audit_test/x'), 0, 'a refused entry stores nothing');

-- anon writes in its own name only (anonymous_rows_are_written_as_anon_within_a_budget
-- a minute.test.sql); the batch form is all or nothing
select tests.act_as_user('anon');
select lives_ok($$select public.record_audit('{"session_id": "s", "tool_id": "audit_test/anon", "decision": "allowed"}')$$,
  'anon writes an audit row of its own call');
select tests.act_as_user('member');
select is((select count(*)::int from public.record_audits(
  '[{"session_id": "b", "tool_id": "audit_test/b1", "decision": "allowed"},
    {"session_id": "b", "tool_id": "audit_test/b2", "decision": "refused", "reason": "permission"}]')), 2,
  'record_audits writes a batch and returns an id per entry');
select throws_ok($$select public.record_audits('[{"session_id": "b", "tool_id": "audit_test/b3", "decision": "allowed"}, {"decision": "allowed"}]')$$,
  '22023', null, 'one bad entry refuses the whole batch');
select is((select count(*)::int from audit_log where tool_id = 'audit_test/b3'), 0, 'nothing of a refused batch is stored');

select * from finish();
rollback;
