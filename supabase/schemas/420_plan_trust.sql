-- What a plan may do that its chain's admins decided: its sandbox
-- (410_sandbox_narrowing.sql) and the variables of the runner's environment it
-- may read (400_secret_grants.sql). One fold, kiwi_internal.plan_trust, computes
-- both walking the chain from the primitive up, for every plan: compute_plan (the live and
-- the cached plans, 130_execution_plan.sql, replaced below) and
-- preview_execution_plan (one step over its executor's plan,
-- 290_local_plans.sql). A plan carries:
--   config.sandbox              the effective sandbox (narrowed where an element is not
--                               admin-published)
--   config.environment.sandbox  the merged environment.sandbox of the admin-published
--                               elements (anyone else's is dropped)
--   allowed_variables           a sorted list of NAMEs and PREFIX_* patterns: every ${VAR}
--                               and env_passthrough entry of the chain's admin-published
--                               elements, and those of the tool itself (when it is not
--                               admin-published) that its namespace was granted. The runner
--                               expands and passes through only variables these cover.
-- The grants enter a plan only as far as the tool's own config names them, so reading a
-- plan tells no one more of a namespace's grants than the tool's manifest already says.

-- Where a plan's fold starts over another plan (a local tool over its executor's):
-- {sandbox, environment_sandbox, allowed_variables} as p_plan carries them.
create function kiwi_internal.plan_trust_of(p_plan jsonb) returns jsonb
  language sql immutable parallel safe
  set search_path = ''
as $$
  select jsonb_build_object('sandbox', p_plan #> '{config,sandbox}',
                            'environment_sandbox', p_plan #> '{config,environment,sandbox}',
                            'allowed_variables', coalesce(p_plan -> 'allowed_variables', '[]'::jsonb))
$$;
revoke execute on function kiwi_internal.plan_trust_of(jsonb) from public;
grant execute on function kiwi_internal.plan_trust_of(jsonb) to anon, authenticated, service_role;

-- The fold. p_below: where it starts (plan_trust_of of an executor's plan; null: nothing
-- below); p_configs: the elements' configs, primitive first, the tool last; p_trusted:
-- whether each is admin-published; p_root_grants: the variables granted to the tool's
-- namespace. -> {sandbox, environment_sandbox, allowed_variables} (a key whose value would
-- be null is left out).
create function kiwi_internal.plan_trust(p_below jsonb, p_configs jsonb[], p_trusted boolean[], p_root_grants text[])
  returns jsonb
  language plpgsql immutable
  set search_path = ''
as $$
declare
  v_sandbox jsonb := p_below -> 'sandbox';
  v_env     jsonb := p_below -> 'environment_sandbox';
  v_vars    text[] := array(select jsonb_array_elements_text(kiwi_internal.json_list(p_below -> 'allowed_variables')));
  v_n       int := coalesce(cardinality(p_configs), 0);
  v_trusted boolean;
begin
  if jsonb_typeof(v_sandbox) = 'null' then v_sandbox := null; end if;
  if jsonb_typeof(v_env) = 'null' then v_env := null; end if;
  for i in 1 .. v_n loop
    v_trusted := coalesce(p_trusted[i], false);
    v_sandbox := kiwi_internal.sandbox_step(v_sandbox, p_configs[i] -> 'sandbox', v_trusted);
    if v_trusted then
      v_env := kiwi_internal.jsonb_deep_merge(v_env, p_configs[i] #> '{environment,sandbox}');
      if strpos(p_configs[i]::text, '${') = 0 then   -- the usual case, without walking the config
        v_vars := v_vars
                  || array(select jsonb_array_elements_text(kiwi_internal.json_list(p_configs[i] -> 'env_passthrough')))
                  || array(select jsonb_array_elements_text(kiwi_internal.json_list(p_configs[i] #> '{environment,env_passthrough}')));
      else
        v_vars := v_vars || array(select r.variable from kiwi_internal.config_variable_refs(p_configs[i]) r);
      end if;
    elsif i = v_n then
      v_vars := v_vars || array(select r.variable from kiwi_internal.config_variable_refs(p_configs[i]) r
                                 where kiwi_internal.variable_covered(r.variable, coalesce(p_root_grants, '{}')));
    end if;
  end loop;
  return case when v_sandbox is null or jsonb_typeof(v_sandbox) = 'null' then '{}'::jsonb
              else jsonb_build_object('sandbox', v_sandbox) end
         || case when v_env is null or jsonb_typeof(v_env) = 'null' then '{}'::jsonb
                 else jsonb_build_object('environment_sandbox', v_env) end
         || jsonb_build_object('allowed_variables',
              coalesce((select jsonb_agg(d.x order by d.x collate "C")
                         from (select distinct u.x from unnest(v_vars) u(x)) d), '[]'::jsonb));
end
$$;
revoke execute on function kiwi_internal.plan_trust(jsonb, jsonb[], boolean[], text[]) from public;
grant execute on function kiwi_internal.plan_trust(jsonb, jsonb[], boolean[], text[]) to anon, authenticated, service_role;

-- p_config (a chain's merged config) with the sandboxes p_trust (plan_trust) decided in
-- place of what the elements wrote.
create function kiwi_internal.sandboxed_config(p_config jsonb, p_trust jsonb) returns jsonb
  language plpgsql immutable parallel safe
  set search_path = ''
as $$
declare
  v_out jsonb := coalesce(p_config, '{}'::jsonb);
begin
  v_out := case when p_trust ? 'sandbox' then v_out || jsonb_build_object('sandbox', p_trust -> 'sandbox')
                else v_out - 'sandbox' end;
  if jsonb_typeof(v_out -> 'environment') = 'object' then
    if p_trust ? 'environment_sandbox' then
      v_out := jsonb_set(v_out, '{environment,sandbox}', p_trust -> 'environment_sandbox');
    elsif (v_out -> 'environment') ? 'sandbox' then   -- set by no admin: dropped
      v_out := v_out #- '{environment,sandbox}';
      if v_out -> 'environment' = '{}'::jsonb then
        v_out := v_out - 'environment';
      end if;
    end if;
  end if;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.sandboxed_config(jsonb, jsonb) from public;
grant execute on function kiwi_internal.sandboxed_config(jsonb, jsonb) to anon, authenticated, service_role;
