-- Every execute action of Kiwi's MCP server is a row of the audit log, not only run and
-- dry_run: create, update, publish, yank, deprecate, delete, import, approve, deny and
-- open_context too, allowed or refused, through record_audit. Other actions are still refused by name.
-- Tool ids start with audit_test/ so that rows written by others do not matter.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(7);

create function tests.refusal(p_entry jsonb) returns text
  language plpgsql as $$
begin
  perform public.record_audit(p_entry);
  return 'recorded';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select tests.act_as_user('owner');
select is(
  (select count(*)::int
     from unnest(array['run', 'dry_run', 'create', 'update', 'publish', 'yank', 'deprecate', 'delete', 'import',
                       'approve', 'deny', 'open_context']) as a(action)
    where public.record_audit(jsonb_build_object(
            'session_id', 'audit-actions-1', 'action', a.action, 'tool_id', 'audit_test/actions_' || a.action,
            'decision', 'allowed', 'outcome', 'success', 'duration_ms', 1.5,
            'params_sha256', repeat('0f', 32), 'params_size', 120)) is not null),
  12, 'record_audit takes every execute action');
select is(
  tests.refusal(jsonb_build_object('session_id', 'audit-actions-1', 'action', 'publish',
                                   'tool_id', 'audit_test/actions_bad', 'decision', 'refused',
                                   'reason', 'invalid manifest: version: must be semver')),
  'recorded', 'a refused publish is recorded with its reason');
select is(
  tests.refusal(jsonb_build_object('session_id', 'audit-actions-1', 'action', 'delete',
                                   'tool_id', 'audit_test/actions_preview', 'decision', 'allowed',
                                   'reason', 'preview: nothing deleted (confirm=true was not given)')),
  'recorded', 'a delete preview is recorded as allowed with no outcome');

select tests.act_as_admin();
select results_eq(
  $$select action, decision, outcome from public.session_activity
     where session_id = 'audit-actions-1' and tool_id in ('audit_test/actions_bad', 'audit_test/actions_preview')
     order by seq$$,
  $$values ('publish', 'refused', null::text), ('delete', 'allowed', null::text)$$,
  'the session''s activity shows them in order');
select is((select count(distinct action)::int from public.audit_log where session_id = 'audit-actions-1'), 12,
          'one row per action, each with its own action');

select tests.act_as_user('owner');
select matches(
  tests.refusal(jsonb_build_object('session_id', 'audit-actions-1', 'action', 'search',
                                   'tool_id', 'audit_test/actions_search', 'decision', 'allowed')),
  'action: one of run, dry_run, create, update, publish, yank, deprecate, delete, import, approve, deny, open_context',
  'an action that is not an execute action is refused by name');

select tests.act_as_admin();
select throws_ok(
  $$insert into public.audit_log (session_id, action, tool_id, decision, caller, caller_role)
    values ('audit-actions-1', 'search', 'audit_test/actions_direct', 'allowed', 'x', 'service_role')$$,
  '23514', null, 'the table itself refuses any other action');

select * from finish();
rollback;
