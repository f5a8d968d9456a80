-- Two questions for the dashboard: "what did this session do" (session_activity, in
-- order) and "what did this tool look like when it ran" (audited_tool_versions: each
-- call with the manifest of the exact version it ran, joined on content_hash, even
-- after newer versions were published).
begin;
\ir ../_setup.sql
select plan(6);

select public.publish_tool_version(
  '{"tool_id": "audit_test_shape", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "description": "first shape"}',
  '[{"path": "main.sh", "content_text": "echo one", "is_entrypoint": true}]');
create temporary table v1 on commit drop as
  select content_hash from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'audit_test_shape' and v.version = '1.0.0';

select public.record_audit(jsonb_build_object('session_id', 'audit-dash', 'tool_id', 'audit_test_shape', 'version', '1.0.0',
  'content_hash', (select content_hash from v1), 'decision', 'allowed', 'outcome', 'success'));
select public.record_audit('{"session_id": "audit-dash", "tool_id": "audit_test_shape", "decision": "refused", "reason": "rate limit", "retry_after_s": 5}');
select public.publish_tool_version(
  '{"tool_id": "audit_test_shape", "tool_type": "script", "executor": "bash_runtime", "version": "2.0.0", "description": "second shape"}',
  '[{"path": "main.sh", "content_text": "echo two", "is_entrypoint": true}]');
select public.record_audit(jsonb_build_object('session_id', 'audit-dash', 'tool_id', 'audit_test_shape', 'version', '2.0.0',
  'content_hash', (select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'audit_test_shape' and v.version = '2.0.0'),
  'decision', 'allowed', 'outcome', 'error'));

select results_eq(
  $$select seq::int, version, decision, outcome from session_activity where session_id = 'audit-dash' order by seq$$,
  $$values (1, '1.0.0', 'allowed', 'success'), (2, null, 'refused', null), (3, '2.0.0', 'allowed', 'error')$$,
  'session_activity lists what the session did, in order');
select is((select reason from session_activity where session_id = 'audit-dash' and seq = 2), 'rate limit',
  'a refused call shows why');
select is((select manifest ->> 'description' from audited_tool_versions
            where session_id = 'audit-dash' and version = '1.0.0'), 'first shape',
  'a call of 1.0.0 shows the manifest of 1.0.0, though 2.0.0 is now the latest');
select is((select manifest ->> 'description' from audited_tool_versions
            where session_id = 'audit-dash' and version = '2.0.0'), 'second shape',
  'a call of 2.0.0 shows the manifest of 2.0.0');
select is((select version_found from audited_tool_versions where session_id = 'audit-dash' and decision = 'refused'), false,
  'a call that never resolved a version has no manifest');
select is((select content_hash from audited_tool_versions where session_id = 'audit-dash' and version = '1.0.0'),
  (select content_hash from v1), 'the manifest is found by the exact content_hash the call ran');

select * from finish();
rollback;
