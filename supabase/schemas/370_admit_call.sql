-- admit_call (370_admit_call.sql) with the needs of a tool's sandbox: besides
-- {tools, mcp, shell}, what the call needs of its context now names what the sandbox of the
-- tool's plan reaches (config.sandbox, 410_sandbox_narrowing.sql):
--   net       its network entries ("host:port"), covered by the context's net globs
--             (230_directives.sql)
--   fs_read   the host paths mounted read-only, covered by fs_read or fs_write (a path a
--             directive may write it may read), as publish holds a directive's required
--             tools to them (450_directive_sandbox_coverage.sql)
--   fs_write  the host paths mounted read-write, covered by fs_write
-- These are the plan's config, never a parameter value: a call naming path parameters is
-- still checked by the runner alone (runner/policy/permissions.py: needs() is what it sends,
-- check() what it checks in memory, and both refuse the same calls). Replaced whole; only the
-- kinds, the fs_read cover and the comment change.

create or replace function public.admit_call(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_kinds    constant text[] := array['shell', 'mcp', 'tools', 'net', 'fs_read', 'fs_write'];
  v_problems text[] := '{}';
  v_context  jsonb;
  v_lacking  text;
  v_verdict  jsonb;
  v_opened   jsonb;
  v_opening  boolean := false;
begin
  if p is null or jsonb_typeof(p) <> 'object' then
    raise exception 'invalid call: call: must be a JSON object' using errcode = '22023',
      detail = '["call: must be a JSON object"]', hint = 'fix the fields named above; nothing was checked';
  end if;
  if jsonb_typeof(p -> 'context_id') not in ('string', 'null')
     or (jsonb_typeof(p -> 'context_id') = 'string'
         and (p ->> 'context_id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') then
    v_problems := v_problems || 'context_id: must be a uuid'::text;
  end if;
  if p ? 'needs' and (
       jsonb_typeof(p -> 'needs') <> 'object' or p ->> 'context_id' is null
       or exists (select 1 from jsonb_each(p -> 'needs') n
                   where not n.key = any (v_kinds) or jsonb_typeof(n.value) <> 'array'
                      or exists (select 1 from jsonb_array_elements(n.value) e where jsonb_typeof(e) <> 'string'))) then
    v_problems := v_problems || 'needs: with a context_id, {shell, mcp, tools, net, fs_read, fs_write}, each a list of names'::text;
  end if;
  if jsonb_typeof(p -> 'open_context') not in ('boolean', 'null') then
    v_problems := v_problems || 'open_context: must be true or false'::text;
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid call: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was checked';
  end if;

  -- 1. the context, and what the call needs of it
  if p ->> 'context_id' is not null then
    v_context := public.get_context((p ->> 'context_id')::uuid);
    select format('%s: %s is not allowed by %s', n.key, v.value, coalesce(v_context #> array['permissions', n.key], '[]'))
      into v_lacking
      from jsonb_each(coalesce(p -> 'needs', '{}')) n, jsonb_array_elements_text(n.value) v(value)
     where not kiwi_internal.patterns_cover(
                 case when n.key = 'fs_read'   -- a path mounted read-only: fs_write covers it too
                      then kiwi_internal.json_list(v_context #> '{permissions,fs_read}')
                           || kiwi_internal.json_list(v_context #> '{permissions,fs_write}')
                      else v_context #> array['permissions', n.key] end, v.value)
     limit 1;
    if v_lacking is not null then
      return jsonb_build_object('allowed', false, 'kind', 'permission_denied', 'reason', v_lacking,
                                'permission', v_lacking, 'context', v_context, 'opened', null);
    end if;
  end if;

  -- 2. check_call's decision
  if not coalesce((p ->> 'open_context')::boolean, false) then
    return kiwi_internal.check_call(p - array['context_id', 'needs', 'open_context'])
           || jsonb_build_object('context', v_context, 'opened', null);
  end if;
  -- 3. and the child opened, both undone when it cannot be (a subtransaction, only here)
  begin
    v_verdict := kiwi_internal.check_call(p - array['context_id', 'needs', 'open_context']);
    if (v_verdict ->> 'allowed')::boolean then
      v_opening := true;
      v_opened := public.open_context(p ->> 'session_id', (p ->> 'tool_id') || coalesce('@' || (p ->> 'version'), ''),
                                      (p ->> 'context_id')::uuid, null);
    end if;
  exception when insufficient_privilege then
    if not v_opening then
      raise;
    end if;
    return jsonb_build_object('allowed', false, 'kind', 'permission_denied', 'reason', sqlerrm,
                              'permission', sqlerrm, 'context', v_context, 'opened', null);
  end;
  return v_verdict || jsonb_build_object('context', v_context, 'opened', v_opened);
end
$$;
revoke execute on function public.admit_call(jsonb) from public;
grant execute on function public.admit_call(jsonb) to anon, authenticated, service_role;
comment on function public.admit_call(jsonb) is
  'The gate of a call with its execution context, in one round trip: check_call''s object plus context_id (read as get_context reads it), needs ({shell, mcp, tools, net, fs_read, fs_write}: checked against that context; an fs_read need is covered by fs_read or fs_write) and open_context (true: open the child context of the directive tool_id@version once allowed). Returns check_call''s verdict with context and opened; a need the context lacks, or a child wider than its parent, is {allowed: false, kind: permission_denied, permission}, with nothing counted or used.';
revoke execute on function public.admit_call(jsonb) from public;
grant execute on function public.admit_call(jsonb) to anon, authenticated, service_role;
