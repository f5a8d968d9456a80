-- Two helpers of publish's trust check (20261128000400_publish_trust.sql) that no API role
-- calls itself: trust_problems and the sandbox_problems it calls run only inside
-- kiwi_internal.publish and kiwi_internal.request_publish_approval, both security definer
-- (so with their owner's rights, whatever the caller holds). preview_execution_plan, which
-- anon and authenticated run with their own rights, does not call them: it folds the
-- sandbox with plan_trust (cutting a widening rather than naming it) and refuses variables
-- with variable_problems and refuse_trust, which they keep. So anon and authenticated lose
-- nothing but the EXECUTE the migrations' grant pattern gave them (tests/security/
-- test_sql_identity.py lists what anon may still execute, and why).
revoke execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) from public, anon, authenticated;
revoke execute on function kiwi_internal.sandbox_problems(jsonb, jsonb, text, text) from public, anon, authenticated;
