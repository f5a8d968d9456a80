-- What a plan may do that its chain's admins decided: its sandbox
-- (20261128000300_sandbox_narrowing.sql) and the variables of the runner's environment it
-- may read (20261128000200_secret_grants.sql). One fold, kiwi_internal.plan_trust, computes
-- both walking the chain from the primitive up, for every plan: compute_plan (the live and
-- the cached plans, 20261121001300_execution_plan.sql, replaced below) and
-- preview_execution_plan (one step over its executor's plan,
-- 20261128000500_preview_trust.sql). A plan carries:
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

-- compute_plan as 20261121001300_execution_plan.sql defines it, with the chain's trust
-- folded in: config.sandbox and config.environment.sandbox are plan_trust's, and the plan
-- carries allowed_variables.
create or replace function kiwi_internal.compute_plan(p_version_uuid uuid, p_admin boolean, p_ns text[])
  returns kiwi_internal.plan_build
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_root       kiwi_internal.chain_row;
  v_params     jsonb;
  v_chain      kiwi_internal.chain_row[];
  v_link       kiwi_internal.chain_row;
  v_links      jsonb;
  v_configs    jsonb[] := '{}';
  v_schemas    jsonb[] := '{}';   -- each element's config_schema, for its append marks
  v_trusted    boolean[] := '{}'; -- each element admin-published, primitive first
  v_tools      uuid[] := '{}';
  v_versions   uuid[] := '{}';
  v_restricted text[] := '{}';
  v_files      jsonb;
  v_trust      jsonb;
  v_status     public.tool_versions;   -- the version's lifecycle: deprecated, yanked
  v_out        kiwi_internal.plan_build;
begin
  select 1, t.ref, 0, t.ref, t.tool_type, v.executor_id, v.version, v.content_hash, v.manifest, v.id,
         t.id, t.namespace, t.visibility, null, null
    into v_root
    from public.tool_versions v join public.tools t on t.id = v.tool_uuid
   where v.id = p_version_uuid;

  v_chain := kiwi_internal.walk_chains(array[v_root], p_admin, p_ns);
  if v_chain[1].error is not null then
    v_out.error := array[v_chain[1].error, v_chain[1].error_code];
    return v_out;
  end if;
  v_links := '[]';
  foreach v_link in array v_chain loop
    v_links := v_links || jsonb_build_object('tool_id', v_link.tool_id, 'tool_type', v_link.tool_type,
                                             'version', v_link.version, 'content_hash', v_link.content_hash);
    v_configs := array_prepend(v_link.manifest -> 'config', v_configs);   -- primitive first
    v_schemas := array_prepend(v_link.manifest -> 'config_schema', v_schemas);
    v_trusted := array_prepend(coalesce((select v.admin_published from public.tool_versions v
                                          where v.id = v_link.version_uuid), false), v_trusted);
    v_tools := v_tools || v_link.tool_uuid;
    v_versions := v_versions || v_link.version_uuid;
    if v_link.depth > 0 and v_link.visibility = 'private' then
      v_restricted := v_restricted || v_link.namespace;
    end if;
  end loop;
  -- the grants of the tool's namespace, read here (definer) and kept only as far as its
  -- own config names them (plan_trust)
  v_trust := kiwi_internal.plan_trust(null, v_configs, v_trusted,
               case when not v_trusted[cardinality(v_trusted)] then
                 array(select g.variable from public.namespace_secret_grants g where g.namespace = v_root.namespace)
               end);

  select v.parameters_schema, v.is_deprecated, v.deprecation_message, v.is_yanked, v.yanked_reason,
         (select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256, 'size_bytes', f.size_bytes,
                                              'is_entrypoint', f.is_entrypoint, 'media_type', f.media_type,
                                              'content_text', f.content_text, 'storage_key', f.storage_key)
                           order by f.path)
            from public.tool_version_files f
           where f.version_id = v.id)
    into v_params, v_status.is_deprecated, v_status.deprecation_message, v_status.is_yanked,
         v_status.yanked_reason, v_files
    from public.tool_versions v
   where v.id = p_version_uuid;

  v_out.plan := jsonb_build_object(
    'tool_id',      v_root.tool_id,
    'version',      v_root.version,
    'tool_type',    v_root.tool_type,
    'content_hash', v_root.content_hash,
    'executor_id',  v_root.executor_id,
    'primitive',    case when v_link.tool_type = 'primitive' then v_link.tool_id end,   -- the last link
    'chain',        v_links,
    'config',       kiwi_internal.sandboxed_config(
                      coalesce(kiwi_internal.jsonb_deep_merge_all(v_configs, v_schemas), '{}'::jsonb), v_trust),
    'allowed_variables', v_trust -> 'allowed_variables',
    'parameters',   v_params,
    'outputs',      v_root.manifest -> 'outputs',
    'manifest',     v_root.manifest,   -- the version's own manifest (what it declares: requires, ...)
    'files',        coalesce(v_files, '[]'::jsonb),
    -- the version's lifecycle (20261121001700_tool_lifecycle.sql), for the runner's warnings: a
    -- deprecated version runs with its message; a yanked one is never latest, so it is here
    -- only when asked for by its exact version
    'deprecated',          v_status.is_deprecated,
    'deprecation_message', v_status.deprecation_message,
    'yanked',              v_status.is_yanked,
    'yanked_reason',       v_status.yanked_reason);
  v_out.chain_tools := v_tools;
  v_out.chain_versions := v_versions;
  v_out.restricted_ns := v_restricted;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.compute_plan(uuid, boolean, text[]) from public, anon, authenticated, service_role;

-- every cached plan, with its sandbox and allowed_variables
select kiwi_internal.rebuild_plans();
