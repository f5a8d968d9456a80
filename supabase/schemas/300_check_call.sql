-- check_call: the gate every run passes, in one round trip. `kiwi run`, Kiwi's MCP
-- `execute`, threads and directives (runner/policy/) ask it once the plan is resolved
-- and the parameters are valid; the permissions of an execution context are checked
-- before (they need the parameters, which the database never sees), the audit row is
-- written behind the call.
--
--   select public.check_call('{"tool_id": "word_count", "params_sha256": "…", ...}')
--
-- Input (a JSON object; unknown keys and bad values are refused, 22023, naming each):
--   tool_id        required: the tool reference, as the resolved plan names it
--   params_sha256  required: sha256 (64 lower-case hex) of the parameters as serialised
--   server         the mcp_server the tool runs on (an mcp_tool's executor), or null;
--                  for a tool the caller may read it must be that server (it is derived
--                  from the tool when null)
--   session_id     the session (per-session limits; recorded with an approval)
--   version, content_hash, params_size   recorded with an approval; content_hash is
--                  compared with an approval's when one is used
--   approval_id    an approval to use for this call, or null
--   dry_run        true: a dry run, which never needs approval and takes nothing from
--                  the rate limits (default false)
--
-- It decides, in this order, for the caller (identity from the session only):
--   (a) rate limits (250_rate_limits.sql): every limit that applies, its
--       counter locked. A signed-in caller (authenticated, service_role or another admin)
--       calling a tool it may read counts in the shared tool-wide and server-wide
--       buckets; anonymous callers count in buckets of their own ('role:anon'), and a
--       call of a tool the caller cannot read (an unpublished local tool, or another
--       namespace's private one) in the caller's own buckets. One over its limit:
--         {allowed: false, kind: 'rate_limited', reason, retry_after_s, limit, limits}
--       and nothing else happens (no approval is recorded or used).
--       An anonymous call is also refused so, while the audit rows anonymous callers may
--       write this minute are used up (registry_limits.anon_audit_rows_per_minute,
--       530_anonymous_audit.sql): a call that runs must leave its row. The
--       budget's state is then one of the answer's limits (scope anonymous_audit), so an
--       anonymous verdict is never remembered as one no limit counts.
--   (b) unless dry_run, approvals (270_approvals.sql):
--       with approval_id: used exactly as use_approval uses it (the caller's own,
--       approved, unexpired, unused, same tool and parameters, same content; never by an
--       anonymous caller); refused:
--         {allowed: false, kind: 'approval_refused', reason, hint, approval_id}
--       without one, when a policy covers the tool: a pending approval is recorded as
--       request_approval records it (anonymous callers: refused, kind approval_refused,
--       "sign in ..."), and
--         {allowed: false, kind: 'approval_pending', reason: 'pending approval <id>
--          (policy <pattern>)', approval: <the approval>, policy: <pattern>}
--       An approval is only ever for a tool the caller may read: otherwise this raises
--       PT404 'tool "…" not found', as request_approval does, whether the tool is
--       private or missing.
--   (c) otherwise the call goes on, and only now is one call taken from every limit
--       (their counters are still locked, so they still have room), unless it is a dry
--       run, which runs nothing and so takes nothing:
--         {allowed: true, limits, approval: <the approval used, or null>, per_session}
--       per_session: whether any enabled limit is scoped to sessions, so that the same call
--       in another session may be decided otherwise; when false, a verdict that counted
--       nothing holds for the caller's call in any session (the runner remembers it so)
-- So a call refused by a rate limit records no approval, and a call held for approval
-- (or refused one) takes nothing from the limits: it has not run. Limits count only calls
-- that run: a dry run is answered as the run would be (refused when a limit has no room
-- left) but takes nothing, so nobody drains a shared bucket by asking.

-- What is wrong with a call to check, each problem named by its field.
create function kiwi_internal.call_check_problems(p jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_problems text[] := '{}';
  v_key      text;
  v_ref      constant text := '^([a-z0-9][a-z0-9_-]{0,62}/)?[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$';
  v_allowed  constant text[] := array['tool_id', 'server', 'session_id', 'version', 'content_hash',
                                      'params_sha256', 'params_size', 'approval_id', 'dry_run'];
begin
  if p is null or jsonb_typeof(p) <> 'object' then
    return array['call: must be a JSON object'];
  end if;
  for v_key in select jsonb_object_keys(p) loop
    if not v_key = any (v_allowed) then
      v_problems := v_problems || format('%s: unknown field (allowed: %s; parameter values are never taken)',
                                         v_key, array_to_string(v_allowed, ', '));
    end if;
  end loop;
  if jsonb_typeof(p -> 'tool_id') is distinct from 'string' or (p ->> 'tool_id') !~ v_ref then
    v_problems := v_problems || 'tool_id: required, a tool reference such as "word_count" or "namespace/tool"'::text;
  end if;
  if jsonb_typeof(p -> 'server') not in ('string', 'null')
     or (jsonb_typeof(p -> 'server') = 'string' and (p ->> 'server') !~ v_ref) then
    v_problems := v_problems || 'server: must be the reference of an mcp_server such as "github_mcp"'::text;
  end if;
  v_problems := v_problems || kiwi_internal.call_field_problems(p);
  if jsonb_typeof(p -> 'approval_id') not in ('string', 'null')
     or (jsonb_typeof(p -> 'approval_id') = 'string'
         and (p ->> 'approval_id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') then
    v_problems := v_problems || 'approval_id: must be a uuid'::text;
  end if;
  if jsonb_typeof(p -> 'dry_run') not in ('boolean', 'null') then
    v_problems := v_problems || 'dry_run: must be true or false'::text;
  end if;
  return v_problems;
end
$$;
revoke execute on function kiwi_internal.call_check_problems(jsonb) from public, anon, authenticated, service_role;

-- The mcp_server a readable tool's call is counted against: an mcp_tool's executor (of
-- the version called, else of its latest), an mcp_server itself, else none. A server
-- given by the caller must be that one.
create function kiwi_internal.call_server(p_tool public.tools, p_version text, p_given text) returns text
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_server text;
begin
  if p_tool.tool_type = 'mcp_server' then
    v_server := p_tool.ref;
  elsif p_tool.tool_type = 'mcp_tool' then
    v_server := coalesce((select v.executor_id from public.tool_versions v
                           where v.tool_uuid = p_tool.id and v.version = p_version), p_tool.executor_id);
  end if;
  if p_given is not null and kiwi_internal.normalize_ref(p_given) is distinct from v_server then
    raise exception 'invalid call: server: tool "%" runs on %, not on "%"', p_tool.ref,
      coalesce('"' || v_server || '"', 'no MCP server'), p_given
      using errcode = '22023', hint = 'give the server of the plan''s chain, or none';
  end if;
  return v_server;
end
$$;
revoke execute on function kiwi_internal.call_server(public.tools, text, text) from public, anon, authenticated, service_role;

create function kiwi_internal.check_call(p jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_problems text[] := kiwi_internal.call_check_problems(p);
  v_anon     boolean := kiwi_internal.caller_role() = 'anon';
  v_tool     public.tools;
  v_ref      text;
  v_server   text;
  v_limits   jsonb;
  v_policy   public.approval_policies;
  v_used     jsonb;
  v_row      public.approvals;
  v_budget   jsonb;
begin
  if cardinality(v_problems) > 0 then
    raise exception 'invalid call: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was checked';
  end if;
  v_tool := kiwi_internal.readable_tool(p ->> 'tool_id');
  if v_tool.id is not null then
    v_ref := v_tool.ref;
    v_server := kiwi_internal.call_server(v_tool, p ->> 'version', p ->> 'server');
  else
    v_ref := kiwi_internal.normalize_ref(p ->> 'tool_id');
    v_server := kiwi_internal.normalize_ref(p ->> 'server');
  end if;

  -- (a) rate limits: checked and locked; the shared buckets only for a signed-in caller
  -- of a tool it may read
  v_limits := kiwi_internal.rate_limit_check(
    v_ref, v_server, nullif(btrim(p ->> 'session_id'), ''),
    case when v_tool.id is not null and not v_anon
              and (kiwi_internal.caller_role() = 'authenticated' or kiwi_internal.caller_is_admin())
         then null else kiwi_internal.bucket_owner() end);
  if not (v_limits ->> 'allowed')::boolean then
    return jsonb_build_object('allowed', false, 'kind', 'rate_limited', 'reason', v_limits -> 'reason',
                              'retry_after_s', v_limits -> 'retry_after_s', 'limit', v_limits -> 'limit',
                              'limits', v_limits -> 'limits');
  end if;
  -- an anonymous call: room for its audit row this minute (read, not taken: the row takes it)
  if v_anon then
    v_budget := kiwi_internal.anon_audit_budget(1, false);
    if v_budget ? 'max_rows' then
      v_budget := jsonb_build_object('id', null, 'scope', 'anonymous_audit', 'key', 'anon_audit_rows_per_minute',
                                     'max_calls', v_budget -> 'max_rows', 'per_seconds', 60, 'calls', v_budget -> 'rows',
                                     'window_resets_at', v_budget -> 'window_resets_at', 'allowed', v_budget -> 'allowed',
                                     'retry_after_s', v_budget -> 'retry_after_s', 'reason', v_budget -> 'reason');
      v_limits := jsonb_set(v_limits, '{limits}', (v_limits -> 'limits') || (v_budget - 'retry_after_s' - 'reason'));
      if not (v_budget ->> 'allowed')::boolean then
        return jsonb_build_object('allowed', false, 'kind', 'rate_limited', 'reason', v_budget -> 'reason',
                                  'retry_after_s', v_budget -> 'retry_after_s',
                                  'limit', v_budget - 'retry_after_s' - 'reason' - 'allowed',
                                  'limits', v_limits -> 'limits');
      end if;
    end if;
  end if;

  -- (b) approvals, unless a dry run
  if not coalesce((p ->> 'dry_run')::boolean, false) then
    if p ->> 'approval_id' is not null then
      if v_anon then
        return jsonb_build_object('allowed', false, 'kind', 'approval_refused',
          'reason', format('approval %s cannot be used: anonymous callers cannot use approvals', p ->> 'approval_id'),
          'hint', 'sign in (a Supabase Auth token) as the user who requested it', 'approval_id', p -> 'approval_id');
      elsif v_tool.id is null then
        raise exception 'tool "%" not found', p ->> 'tool_id' using errcode = 'PT404',
          hint = 'approvals are for tools you can read: search_tools finds them';
      end if;
      v_used := kiwi_internal.spend_approval((p ->> 'approval_id')::uuid, v_ref, p ->> 'params_sha256',
                                             p ->> 'content_hash');
      if v_used ? 'refused' then
        return jsonb_build_object('allowed', false, 'kind', 'approval_refused',
                                  'reason', v_used #> '{refused,message}', 'hint', v_used #> '{refused,hint}',
                                  'approval_id', p -> 'approval_id');
      end if;
    else
      v_policy := kiwi_internal.approval_policy_for(v_ref);
      if v_policy.id is not null then
        if v_tool.id is null then
          raise exception 'tool "%" not found', p ->> 'tool_id' using errcode = 'PT404',
            hint = 'approvals are for tools you can read: search_tools finds them';
        elsif v_anon then
          return jsonb_build_object('allowed', false, 'kind', 'approval_refused',
            'reason', format('sign in: policy %s requires approval of %s, and anonymous callers cannot request approvals',
                             v_policy.pattern, v_ref),
            'hint', 'sign in (a Supabase Auth token), then call again', 'approval_id', null);
        end if;
        v_row := kiwi_internal.file_approval(p, v_tool, v_policy);
        return jsonb_build_object('allowed', false, 'kind', 'approval_pending',
                                  'reason', format('pending approval %s (policy %s)', v_row.id, v_policy.pattern),
                                  'approval', kiwi_internal.approval_json(v_row), 'policy', v_policy.pattern);
      end if;
    end if;
  end if;

  -- (c) the call goes on: take one call from every limit, unless it is a dry run (it runs nothing)
  if not coalesce((p ->> 'dry_run')::boolean, false) then
    v_limits := kiwi_internal.rate_limit_take(v_limits);
  end if;
  return jsonb_build_object('allowed', true, 'limits', v_limits -> 'limits', 'approval', v_used -> 'approval',
                            'per_session', exists (select 1 from public.rate_limits l
                                                    where l.enabled and l.scope = 'session'));
end
$$;
revoke execute on function kiwi_internal.check_call(jsonb) from public;
-- It reads the caller from the session only (caller_role, caller_is_admin, bucket_owner,
-- caller_identity): anonymous callers get their own buckets and never an approval.
grant execute on function kiwi_internal.check_call(jsonb) to anon, authenticated, service_role;

create function public.check_call(p jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.check_call(p);
end
$$;
comment on function public.check_call(jsonb) is
  'The gate of a call, in one round trip: {tool_id, params_sha256 (required), server, session_id, version, content_hash, params_size, approval_id, dry_run}. Rate limits first (all or none; anonymous callers in buckets of their own), then, unless dry_run, the approval (one used, or a pending one recorded when a policy covers the tool). Returns {allowed: true, limits, approval, per_session (whether any limit is scoped to sessions)} or {allowed: false, kind: rate_limited | approval_refused | approval_pending, reason, ...}; limits are taken only when the call is allowed and is not a dry run (a dry run runs nothing, so it takes nothing).';
revoke execute on function public.check_call(jsonb) from public;
grant execute on function public.check_call(jsonb) to anon, authenticated, service_role;
