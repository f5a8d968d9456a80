-- The one RPC the runner needs: chain, merged config, parameter schema and files.

create function kiwi_internal.execution_plan(p_tool_id text, p_version text default null)
  returns jsonb
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  v_rows kiwi_internal.chain_row[];
  v_root kiwi_internal.chain_row;
begin
  select array_agg(c order by c.depth) into v_rows
    from kiwi_internal.resolve_chains(array[p_tool_id], p_version) c;
  v_root := v_rows[1];
  if v_root.error is not null then
    raise exception '%', v_root.error using errcode = v_root.error_code;
  end if;
  return jsonb_build_object(
    'tool_id',      v_root.tool_id,
    'version',      v_root.version,
    'tool_type',    v_root.tool_type,
    'content_hash', v_root.content_hash,
    'executor_id',  v_root.executor_id,
    'primitive',    case when v_rows[cardinality(v_rows)].tool_type = 'primitive'
                         then v_rows[cardinality(v_rows)].tool_id end,
    'chain',        (select jsonb_agg(jsonb_build_object('tool_id', r.tool_id, 'tool_type', r.tool_type,
                                                         'version', r.version, 'content_hash', r.content_hash)
                                      order by r.depth)
                       from unnest(v_rows) r),
    'config',       coalesce(kiwi_internal.jsonb_deep_merge_all(array(
                               select r.manifest -> 'config' from unnest(v_rows) r order by r.depth desc)), '{}'::jsonb),
    'parameters',   (select v.parameters_schema from public.tool_versions v where v.id = v_root.version_uuid),
    'outputs',      v_root.manifest -> 'outputs',
    'files',        coalesce((select jsonb_agg(jsonb_build_object(
                                 'path', f.path, 'sha256', f.sha256, 'size_bytes', f.size_bytes,
                                 'is_entrypoint', f.is_entrypoint, 'media_type', f.media_type,
                                 'content_text', f.content_text, 'storage_key', f.storage_key)
                               order by f.path)
                                from public.tool_version_files f
                               where f.version_id = v_root.version_uuid), '[]'::jsonb)
  );
end
$$;
revoke execute on function kiwi_internal.execution_plan(text, text) from public;
grant execute on function kiwi_internal.execution_plan(text, text) to anon, authenticated, service_role;

create function public.resolve_execution_plan(p_tool_id text, p_version text default null)
  returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  return kiwi_internal.execution_plan(p_tool_id, p_version);
end
$$;
comment on function public.resolve_execution_plan(text, text) is
  'Everything needed to run a tool: its chain, the configs deep-merged from the primitive up (child wins, objects merge, arrays and scalars replaced), its parameters as JSON Schema, and its files.';
revoke execute on function public.resolve_execution_plan(text, text) from public;
grant execute on function public.resolve_execution_plan(text, text) to anon, authenticated, service_role;
