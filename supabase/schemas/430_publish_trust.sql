-- Publish holds a non-admin's config to what its executor chain's admins allowed: a config
-- that widens the sandbox (410_sandbox_narrowing.sql), sets the sandbox of
-- environment steps, or reads a variable of the runner's environment neither its chain's
-- admin-published elements read nor its namespace was granted
-- (400_secret_grants.sql) is refused (42501), naming each field and value, unless
-- an admin's approval of this very content is spent on it (request_publish_approval lists
-- them as the reasons an approval is needed). An admin's version, or one published with an
-- approval, is admin_published (390_admin_published.sql): it may widen, and
-- what it reads is read by every tool above it. The same check refuses a non-admin's
-- preview_execution_plan (290_local_plans.sql).
--
-- kiwi_internal.publish and kiwi_internal.request_publish_approval are replaced here
-- (160_publish.sql, 270_approvals.sql): the same bodies, with the
-- check, the approval it allows, and admin_published recorded.

-- The plan of executor p_exec as the caller sees it; null when there is none or its chain
-- does not resolve (publish and preview refuse that in their own words).
create function kiwi_internal.executor_plan(p_exec text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  if p_exec is null then
    return null;
  end if;
  return kiwi_internal.execution_plan(p_exec);
exception when others then
  return null;
end
$$;
revoke execute on function kiwi_internal.executor_plan(text) from public;
grant execute on function kiwi_internal.executor_plan(text) to anon, authenticated, service_role;

-- What p_config (a non-admin's, for namespace p_namespace, on executor p_exec whose plan is
-- p_exec_plan) widens or reads beyond its chain and p_grants (the namespace's grants), one
-- message each. Empty: nothing.
create function kiwi_internal.trust_problems(p_config jsonb, p_exec_plan jsonb, p_exec text, p_namespace text,
                                             p_grants text[])
  returns text[]
  language sql immutable
  set search_path = ''
as $$
  select kiwi_internal.sandbox_problems(p_config -> 'sandbox', p_exec_plan #> '{config,sandbox}', 'config.sandbox', p_exec)
         || case when p_config #> '{environment,sandbox}' is not null
                 then array['config.environment.sandbox: only an admin-published runtime sets the sandbox of environment steps; only an admin may widen a sandbox']
                 else '{}'::text[] end
         || kiwi_internal.variable_problems(p_config,
              array(select jsonb_array_elements_text(kiwi_internal.json_list(p_exec_plan -> 'allowed_variables'))),
              p_grants, p_namespace)
$$;
revoke execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) from public;
grant execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) to anon, authenticated, service_role;
-- Two helpers of publish's trust check (430_publish_trust.sql) that no API role
-- calls itself: trust_problems and the sandbox_problems it calls run only inside
-- kiwi_internal.publish and kiwi_internal.request_publish_approval, both security definer
-- (so with their owner's rights, whatever the caller holds). preview_execution_plan, which
-- anon and authenticated run with their own rights, does not call them: it folds the
-- sandbox with plan_trust (cutting a widening rather than naming it) and refuses variables
-- with variable_problems and refuse_trust, which they keep. So anon and authenticated lose
-- nothing but the EXECUTE the migrations' grant pattern gave them (tests/security/
-- test_sql_identity.py lists what anon may still execute, and why).
revoke execute on function kiwi_internal.trust_problems(jsonb, jsonb, text, text, text[]) from public, anon, authenticated;

-- Refuse p_problems (trust_problems), if any, in one error.
create function kiwi_internal.refuse_trust(p_problems text[]) returns void
  language plpgsql immutable
  set search_path = ''
as $$
begin
  if cardinality(p_problems) > 0 then
    raise exception '%', array_to_string(p_problems, '; ')
      using errcode = '42501', detail = to_jsonb(p_problems)::text,
            hint = case when array_to_string(p_problems, ' ') like '%grant_secret%'
                        then 'an admin grants the variable to the namespace (select grant_secret(namespace, variable)) or publishes the tool (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)'
                        else 'an admin publishes it (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)' end;
  end if;
end
$$;
revoke execute on function kiwi_internal.refuse_trust(text[]) from public;
grant execute on function kiwi_internal.refuse_trust(text[]) to anon, authenticated, service_role;
