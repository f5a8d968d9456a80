-- admit_call: the whole gate of a call in one round trip, its execution context included.
--
-- check_call (20261121002800_check_call.sql) decides rate limits and approvals. A call made
-- under an execution context (20261121002300_contexts.sql) also needs the context's
-- permissions, and running a directive opens the child context its calls are made in. A
-- runner that already holds the context checks the permissions itself (the paths a call
-- names are parameters, which the database never sees) and asks check_call, which it may
-- answer from memory. Otherwise, instead of get_context, check_call and open_context in
-- turn, it asks this once (runner/policy/gate.py; with check_call's decision remembered it
-- asks only the one it lacks, open_context or get_context):
--
--   select public.admit_call('{"tool_id": "my_directive", "version": "1.0.0", "params_sha256": "…",
--                              "session_id": "s", "context_id": "…", "open_context": true}')
--
-- Input: check_call's object, and
--   context_id    the context the call is made under: one of the caller's, unexpired, read
--                 as get_context reads it (PT404 unknown or another caller's, 42501 expired)
--   needs         what the call needs of that context that its parameters do not decide,
--                 {tools: [refs], mcp: ["server.tool"], shell: [commands]}; each value must be
--                 covered by a pattern of the context's kind (kiwi_internal.patterns_cover,
--                 as runner/policy/permissions.py matches). Only with context_id.
--   open_context  true: the call runs a directive (tool_id@version); once it is allowed, its
--                 child context is opened in session_id under context_id (or at the top
--                 level), exactly as open_context opens it
-- In this order:
--   1. the context read; a need it does not cover:
--        {allowed: false, kind: 'permission_denied', permission: 'KIND: VALUE is not allowed by [...]'}
--      and nothing else happens (no limit counted, no approval recorded)
--   2. check_call's decision, refusals as it returns them
--   3. allowed and open_context: the child opened. One wider than its parent (42501), or one
--      the caller may not open, is
--        {allowed: false, kind: 'permission_denied', permission: <open_context's message>}
--      and check_call's work is undone with it: no limit taken, no approval used.
-- Every answer is check_call's verdict with `context` (the context read, or null) and
-- `opened` (the child context, or null).
--
-- Security invoker: whom the call acts as comes from the session only, through get_context
-- (RLS: the caller's own contexts), check_call and open_context (a parent must be the
-- caller's); nothing in p names a caller.

create function public.admit_call(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_kinds    constant text[] := array['shell', 'mcp', 'tools'];
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
    v_problems := v_problems || 'needs: with a context_id, {shell, mcp, tools}, each a list of names'::text;
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
     where not kiwi_internal.patterns_cover(v_context #> array['permissions', n.key], v.value)
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
comment on function public.admit_call(jsonb) is
  'The gate of a call with its execution context, in one round trip: check_call''s object plus context_id (read as get_context reads it), needs ({shell, mcp, tools}: checked against that context) and open_context (true: open the child context of the directive tool_id@version once allowed). Returns check_call''s verdict with context and opened; a need the context lacks, or a child wider than its parent, is {allowed: false, kind: permission_denied, permission}, with nothing counted or used.';
revoke execute on function public.admit_call(jsonb) from public;
grant execute on function public.admit_call(jsonb) to anon, authenticated, service_role;
