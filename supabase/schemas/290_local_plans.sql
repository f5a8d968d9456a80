-- preview_execution_plan (290_local_plans.sql) with the trust of
-- 420_plan_trust.sql: the local tool's sandbox is one step of plan_trust over its
-- executor's plan (narrowing unless an admin previews it), its plan carries
-- allowed_variables, and a non-admin's ${VAR} or env_passthrough entry that neither its
-- executor chain reads nor its namespace was granted is refused as publish refuses it
-- (430_publish_trust.sql). A sandbox wider than its chain's is not refused here
-- but cut, as the plan of a published version would be; publish refuses it.

create or replace function public.preview_execution_plan(p_manifest jsonb, p_files jsonb default '[]')
  returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_problems  text[];
  v_ns        text;
  v_tool_id   text;
  v_ref       text;
  v_type      text := p_manifest ->> 'tool_type';
  v_exec      text;
  v_rule      public.tool_type_rules;
  v_exec_plan jsonb;
  v_below     text[];
  v_files     jsonb;
  v_hash      text;
  v_primitive text;
  v_message   text;
  v_code      text;
  v_checked   jsonb;
  v_admin     boolean := kiwi_internal.caller_is_admin();
  v_grants    text[] := '{}';
  v_trust     jsonb;
begin
  p_files := coalesce(p_files, '[]'::jsonb);
  v_problems := kiwi_internal.manifest_problems(p_manifest);
  if cardinality(v_problems) = 0 then
    v_problems := kiwi_internal.files_problems(p_files, p_manifest);
  end if;
  if cardinality(v_problems) = 0 then   -- its config against its chain's contract, as publish holds it
    v_checked := kiwi_internal.checked_config(p_manifest);
    v_problems := array(select jsonb_array_elements_text(v_checked -> 'problems'));
    p_manifest := v_checked -> 'manifest';
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid manifest: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; publish would refuse them too';
  end if;

  v_tool_id := p_manifest ->> 'tool_id';
  if position('/' in v_tool_id) > 0 then
    v_ns := split_part(v_tool_id, '/', 1);
    v_tool_id := split_part(v_tool_id, '/', 2);
  else
    v_ns := coalesce(p_manifest ->> 'namespace', 'public');
  end if;
  v_ref := kiwi_internal.tool_ref(v_ns, v_tool_id);
  v_exec := kiwi_internal.normalize_ref(p_manifest ->> 'executor');
  select * into v_rule from public.tool_type_rules r where r.tool_type = v_type;

  -- the executor's own plan: its chain down to a primitive and its merged config
  if v_exec is not null then
    if not exists (select 1 from public.tools t
                    where t.ref = v_exec and kiwi_internal.can_read(t.visibility, t.namespace)) then
      raise exception 'executor "%" of tool "%" not found', v_exec, v_ref
        using errcode = 'PT404', hint = 'publish the executor first, or name one you can see';
    end if;
    begin
      v_exec_plan := kiwi_internal.execution_plan(v_exec);
    exception when others then
      get stacked diagnostics v_message = message_text, v_code = returned_sqlstate;
      raise exception 'tool "%" cannot run on executor "%": %', v_ref, v_exec, v_message using errcode = v_code;
    end;
    if not (v_exec_plan #>> '{chain,0,tool_type}') = any (v_rule.executor_types) then
      raise exception 'tool "%" (%) cannot execute on "%" (%): a % executes on %',
        v_ref, v_type, v_exec, v_exec_plan #>> '{chain,0,tool_type}', v_type,
        array_to_string(v_rule.executor_types, ' or ')
        using errcode = 'PT422', hint = 'see the executor matrix: select * from tool_type_rules';
    end if;
    -- The executor's chain was walked by walk_chains (120_chain_resolution.sql)
    -- for its plan; this tool adds one link on top, checked as the walker checks a link and
    -- refused in its words: itself further down is a cycle, more than ten below it too deep.
    -- (Not a call to walk_chains: a preview runs with the caller's rights, and the walker,
    -- which trusts the visibility it is handed, is no API role's to call.)
    select array_agg(c ->> 'tool_id' order by n) into v_below
      from jsonb_array_elements(v_exec_plan -> 'chain') with ordinality as a(c, n);
    if v_ref = any (v_below) then
      v_message := (kiwi_internal.chain_error('cycle', v_ref, array[v_ref] || v_below[1:array_position(v_below, v_ref) - 1],
                                               v_ref))[1];
      raise exception '%', v_message using errcode = 'PT422';
    elsif cardinality(v_below) > 10 then
      v_message := (kiwi_internal.chain_error('too_deep', v_ref, array[v_ref] || v_below[1:10], v_below[11]))[1];
      raise exception '%', v_message using errcode = 'PT422';
    end if;
    v_primitive := v_exec_plan ->> 'primitive';
    if v_rule.terminal_primitive is not null and v_primitive is distinct from v_rule.terminal_primitive then
      v_message := (kiwi_internal.chain_error('wrong_primitive', v_ref, array[v_ref] || v_below,
                                              v_rule.terminal_primitive, v_type))[1];
      raise exception '%', v_message using errcode = 'PT422';
    end if;
  elsif v_type = 'primitive' then
    v_primitive := v_ref;
  end if;

  -- what it may read of the runner's environment, and its sandbox: a local tool is not
  -- admin-published unless an admin previews it (its namespace's grants count when the
  -- caller is a member, who may read them)
  if not v_admin and v_ns = any (kiwi_internal.my_namespaces()) then
    v_grants := array(select g.variable from public.namespace_secret_grants g where g.namespace = v_ns);
  end if;
  if not v_admin then
    perform kiwi_internal.refuse_trust(kiwi_internal.variable_problems(p_manifest -> 'config',
      array(select jsonb_array_elements_text(kiwi_internal.json_list(v_exec_plan -> 'allowed_variables'))),
      v_grants, v_ns));
  end if;
  v_trust := kiwi_internal.plan_trust(kiwi_internal.plan_trust_of(v_exec_plan), array[p_manifest -> 'config'],
                                      array[v_admin], v_grants);

  v_files := kiwi_internal.planned_files(p_manifest, p_files);
  v_hash := kiwi_internal.content_hash(p_manifest, v_files);
  return jsonb_build_object(
    'tool_id',      v_ref,
    'version',      p_manifest ->> 'version',
    'tool_type',    v_type,
    'content_hash', v_hash,
    'executor_id',  v_exec,
    'primitive',    v_primitive,
    'chain',        jsonb_build_array(jsonb_build_object('tool_id', v_ref, 'tool_type', v_type,
                                                         'version', p_manifest ->> 'version',
                                                         'content_hash', v_hash))
                    || coalesce(v_exec_plan -> 'chain', '[]'::jsonb),
    -- merged as compute_plan merges it: under the marks of the executor's chain (a list one of
    -- them marks "x-merge": "append" is appended to, never replaced)
    'config',       kiwi_internal.sandboxed_config(
                      coalesce(kiwi_internal.jsonb_deep_merge(v_exec_plan -> 'config', p_manifest -> 'config',
                                                              v_checked -> 'append'), '{}'::jsonb), v_trust),
    'allowed_variables', v_trust -> 'allowed_variables',
    'parameters',   kiwi_internal.parameters_schema(p_manifest -> 'parameters'),
    'outputs',      p_manifest -> 'outputs',
    'manifest',     p_manifest,
    'files',        v_files,
    -- an unpublished version is neither deprecated nor yanked (compute_plan's lifecycle keys)
    'deprecated', false, 'deprecation_message', null, 'yanked', false, 'yanked_reason', null,
    -- the registry's tool this local one shadows (its latest version), null when none:
    -- the runner announces the shadowing, at no extra round trip
    'shadows',      (select t.latest_version from public.tools t
                      where t.ref = v_ref and kiwi_internal.can_read(t.visibility, t.namespace)))
    -- the old spellings of config keys made canonical, as publish would say
    || case when jsonb_array_length(v_checked -> 'normalised') > 0
            then jsonb_build_object('normalised', v_checked -> 'normalised') else '{}'::jsonb end;
end
$$;
revoke execute on function public.preview_execution_plan(jsonb, jsonb) from public;
grant execute on function public.preview_execution_plan(jsonb, jsonb) to anon, authenticated, service_role;
comment on function public.preview_execution_plan(jsonb, jsonb) is
  'The plan an unpublished tool (a local space''s tool.yaml) would have, in resolve_execution_plan''s shape: validated as publish validates (its config made canonical, normalised listing the old spellings rewritten), its executor chain and merged config taken from the registry. shadows: the latest version of the registry''s tool of the same identity, if you can see one. Writes nothing.';
revoke execute on function public.preview_execution_plan(jsonb, jsonb) from public;
grant execute on function public.preview_execution_plan(jsonb, jsonb) to anon, authenticated, service_role;

-- Read as the caller may read by exact reference (public, unlisted, a member's private).
create function kiwi_internal.version_source(p_tool_id text, p_version text) returns jsonb
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_ref  text := kiwi_internal.normalize_ref(p_tool_id);
  v_row  record;
  v_kind text;
begin
  select t.ref, t.namespace, t.tool_type, t.latest_version, v.id, v.version, v.content_hash, v.manifest,
         v.manifest_yaml, v.is_latest, v.is_deprecated, v.is_yanked
    into v_row
    from public.tools t
    left join public.tool_versions v
      on v.tool_uuid = t.id
     and (case when p_version is null then v.is_latest else v.version = p_version end)
   where t.ref = v_ref
     and kiwi_internal.can_read(t.visibility, t.namespace);
  v_kind := case when not found then 'not_found'
                 when v_row.id is null and p_version is not null then 'no_version'
                 when v_row.id is null then 'all_yanked' end;
  if v_kind is not null then
    raise exception '%', (kiwi_internal.chain_error(v_kind, coalesce(v_row.ref, p_tool_id), null, null, p_version))[1]
      using errcode = 'PT404';
  end if;
  return jsonb_build_object(
    'tool_id', v_row.ref, 'namespace', v_row.namespace, 'tool_type', v_row.tool_type, 'version', v_row.version,
    'latest_version', v_row.latest_version, 'is_latest', v_row.is_latest, 'is_deprecated', v_row.is_deprecated,
    'is_yanked', v_row.is_yanked,
    'content_hash', v_row.content_hash, 'manifest', v_row.manifest, 'manifest_yaml', v_row.manifest_yaml,
    'files', (select coalesce(jsonb_agg(jsonb_build_object(
                       'path', f.path, 'sha256', f.sha256, 'size_bytes', f.size_bytes,
                       'is_entrypoint', f.is_entrypoint, 'media_type', f.media_type,
                       'content_text', f.content_text, 'storage_key', f.storage_key) order by f.path), '[]'::jsonb)
                from public.tool_version_files f
               where f.version_id = v_row.id));
end
$$;
revoke execute on function kiwi_internal.version_source(text, text) from public;
grant execute on function kiwi_internal.version_source(text, text) to anon, authenticated, service_role;

create function public.tool_version_source(p_tool_id text, p_version text default null)
  returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  return kiwi_internal.version_source(p_tool_id, p_version);
end
$$;
comment on function public.tool_version_source(text, text) is
  'What a version (default: the latest) was published from: {tool_id, namespace, version, content_hash, manifest, manifest_yaml (as written, or null), files [{path, content_text, ...}]}.';
revoke execute on function public.tool_version_source(text, text) from public;
grant execute on function public.tool_version_source(text, text) to anon, authenticated, service_role;
