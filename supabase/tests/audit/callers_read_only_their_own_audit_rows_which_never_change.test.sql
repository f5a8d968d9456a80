-- audit_log × {select, insert, update, delete} × {anon, owner, stranger, service_role}:
-- callers read only the calls they made, admins all; nobody writes the table directly
-- (rows come through record_audit), nobody updates a row, and only service_role deletes
-- (retention). The dashboard views are security_invoker and follow the same rules.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(16);

select tests.act_as_user('owner');
select public.record_audit('{"session_id": "audit-owner", "tool_id": "audit_test/owner_tool", "decision": "allowed", "outcome": "success"}');
select tests.act_as_user('stranger');
select public.record_audit('{"session_id": "audit-stranger", "tool_id": "audit_test/owner_tool", "decision": "refused", "reason": "rate limit"}');
select tests.act_as_user('service_role');
select public.record_audit('{"session_id": "audit-service", "tool_id": "audit_test/service_tool", "decision": "allowed"}');

select tests.act_as_user('anon');
select throws_ok($$select * from audit_log$$, '42501', 'permission denied for table audit_log', 'anon reads no audit rows');
select throws_ok($$select * from session_activity$$, '42501', null, 'anon reads no session activity');
select tests.act_as_user('owner');
select results_eq($$select session_id, decision from audit_log where tool_id like 'audit_test/%'$$,
  $$values ('audit-owner', 'allowed')$$, 'the owner reads only the owner''s own calls');
select results_eq($$select session_id from session_activity where tool_id like 'audit_test/%'$$,
  $$values ('audit-owner')$$, 'session_activity shows the owner only the owner''s sessions');
select tests.act_as_user('stranger');
select results_eq($$select session_id, decision from audit_log where tool_id like 'audit_test/%'$$,
  $$values ('audit-stranger', 'refused')$$, 'a stranger reads only the stranger''s own calls, even of another''s tool');
select is_empty($$select 1 from audited_tool_versions where session_id = 'audit-owner'$$,
  'audited_tool_versions shows a stranger nothing of the owner''s calls');
select tests.act_as_user('service_role');
select is((select count(*)::int from audit_log where tool_id like 'audit_test/%'), 3, 'service_role reads every call');

-- writes
select tests.act_as_user('owner');
select throws_ok($$insert into audit_log (session_id, tool_id, decision, caller, caller_role) values ('s', 'audit_test/x', 'allowed', 'me', 'authenticated')$$,
  '42501', 'permission denied for table audit_log', 'the owner cannot insert an audit row directly');
select throws_ok($$update audit_log set decision = 'allowed' where tool_id like 'audit_test/%'$$,
  '42501', 'permission denied for table audit_log', 'the owner cannot rewrite the audit log');
select throws_ok($$delete from audit_log where tool_id like 'audit_test/%'$$,
  '42501', 'permission denied for table audit_log', 'the owner cannot delete the owner''s audit rows');
select tests.act_as_user('service_role');
select throws_ok($$insert into audit_log (session_id, tool_id, decision, caller, caller_role) values ('s', 'audit_test/x', 'allowed', 'me', 'service_role')$$,
  '42501', 'permission denied for table audit_log', 'service_role writes through record_audit too, never directly');
select throws_ok($$update audit_log set decision = 'allowed' where tool_id like 'audit_test/%'$$,
  '42501', 'permission denied for table audit_log', 'service_role cannot update an audit row');
select is(tests.rows_affected($$delete from audit_log where tool_id = 'audit_test/service_tool'$$), 1,
  'service_role deletes old audit rows (retention)');
select tests.act_as_admin();
select throws_ok($$update audit_log set decision = 'allowed' where tool_id like 'audit_test/%'$$,
  '23514', null, 'not even postgres updates an audit row: the log is append-only');

-- grants
select table_privs_are('public', 'audit_log', 'anon', array[]::text[], 'anon holds no privilege on audit_log');
select function_privs_are('public', 'record_audit', array['jsonb'], 'anon', array['EXECUTE'],
  'anon may execute record_audit: its rows are written in its name, within its budget');

select * from finish();
rollback;
