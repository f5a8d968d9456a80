-- Rate limits, declared as data and enforced in Postgres, so that every Kiwi process
-- (several MCP servers, CLIs, machines) shares the same counters.
--
-- A limit is a row of public.rate_limits: at most max_calls calls per per_seconds, for
--   scope 'tool'    key = a tool reference: calls of that tool, whoever makes them;
--   scope 'server'  key = an mcp_server reference: calls of any of its tools;
--   scope 'session' key = a session id: calls made in that session.
-- key '*' applies the limit to every tool / server / session, each counted on its own.
--
-- take_rate_limit(tool, server, session) checks every limit that applies to a call and
-- takes one call from all of them, or from none: it locks each counter row (an upsert,
-- in a fixed order, so two callers never deadlock), and only when every limit has room
-- does it count the call. A refused call says when to retry.
--
-- Windows are FIXED: aligned to multiples of per_seconds since the epoch (a limit of 10
-- per 60 s allows 10 calls in 12:00:00-12:00:59, 10 more from 12:01:00). Simple and
-- exact; a burst of up to 2 x max_calls can straddle a window boundary.

create table public.rate_limits (
  id           uuid primary key default gen_random_uuid(),
  scope        text not null
               constraint rate_limits_scope_values check (scope in ('tool', 'server', 'session')),
  key          text not null
               constraint rate_limits_key_format check (char_length(key) between 1 and 300 and key !~ '[[:cntrl:]]'),
  max_calls    int not null constraint rate_limits_max_calls_range check (max_calls >= 0),
  per_seconds  int not null constraint rate_limits_per_seconds_range check (per_seconds between 1 and 31622400),
  enabled      boolean not null default true,
  description  text constraint rate_limits_description_length check (char_length(description) <= 500),
  created_at   timestamptz not null default now(),
  constraint rate_limits_one_per_window unique (scope, key, per_seconds)
);
comment on table public.rate_limits is
  'Rate limits as data: at most max_calls calls per per_seconds (a fixed window) for a tool, an MCP server or a session (key: its reference or session id; * for each one). Enforced by take_rate_limit. Written by admins (service_role); readable by signed-in users.';
comment on column public.rate_limits.key is 'A tool reference (scope tool), an mcp_server reference (scope server), a session id (scope session), or * for every one of them, each counted separately.';
comment on column public.rate_limits.max_calls is 'Calls allowed per window; 0 blocks the tool, server or session.';
comment on column public.rate_limits.per_seconds is 'The window''s length in seconds; windows are aligned to multiples of it since the epoch.';

-- Keys are stored as references are everywhere else: public/x is x.
create function kiwi_internal.rate_limits_normalize() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  if new.scope in ('tool', 'server') then
    new.key := kiwi_internal.normalize_ref(new.key);
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.rate_limits_normalize() from public;
create trigger rate_limits_normalize
  before insert or update on public.rate_limits
  for each row execute function kiwi_internal.rate_limits_normalize();

alter table public.rate_limits enable row level security;
revoke all on table public.rate_limits from public, anon, authenticated, service_role;
grant select on table public.rate_limits to authenticated;
grant select, insert, update, delete on table public.rate_limits to service_role;

create policy "signed-in users and admins read rate limits"
  on public.rate_limits for select to authenticated, service_role
  using (true);
create policy "admins declare rate limits"
  on public.rate_limits for insert to service_role
  with check ((select kiwi_internal.caller_is_admin()));
create policy "admins change rate limits"
  on public.rate_limits for update to service_role
  using ((select kiwi_internal.caller_is_admin()))
  with check ((select kiwi_internal.caller_is_admin()));
create policy "admins remove rate limits"
  on public.rate_limits for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- The counters: one row per limit and subject (the tool, server or session counted),
-- holding the current window and the calls taken in it. Private: only take_rate_limit
-- touches them.
create table kiwi_internal.rate_limit_counters (
  limit_id      uuid not null references public.rate_limits (id) on delete cascade,
  subject       text not null,
  window_start  timestamptz not null,
  calls         int not null default 0 check (calls >= 0),
  primary key (limit_id, subject)
);
comment on table kiwi_internal.rate_limit_counters is
  'Calls taken per rate limit and subject in the current fixed window; written only by take_rate_limit.';
revoke all on table kiwi_internal.rate_limit_counters from public, anon, authenticated, service_role;

create function kiwi_internal.take_rate_limit(p_tool_id text, p_server text, p_session text) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_tool     text := kiwi_internal.normalize_ref(p_tool_id);
  v_server   text := nullif(kiwi_internal.normalize_ref(p_server), '');
  v_session  text := nullif(btrim(p_session), '');
  v_now      timestamptz := clock_timestamp();
  v_limit    record;
  v_counter  record;
  v_states   jsonb := '[]';
  v_state    jsonb;
  v_blocking jsonb;
  v_retry    numeric;
  v_ids      uuid[] := '{}';
  v_subjects text[] := '{}';
begin
  if v_tool is null or v_tool = '' then
    raise exception 'take_rate_limit: p_tool_id is required' using errcode = '22023',
      hint = 'name the tool being called';
  end if;
  if char_length(v_tool) > 300 or char_length(v_server) > 300 or char_length(v_session) > 200 then
    raise exception 'take_rate_limit: tool and server at most 300 characters, session at most 200'
      using errcode = '22023';
  end if;

  -- Every applicable limit, in a fixed order (so that concurrent callers lock counters
  -- in the same order). A session is counted per caller: one caller cannot use up
  -- another's session by naming it.
  for v_limit in
    select l.id, l.scope, l.key, l.max_calls, l.per_seconds,
           case l.scope when 'tool' then v_tool
                        when 'server' then v_server
                        else kiwi_internal.caller_identity() || ' ' || v_session end as subject
      from public.rate_limits l
     where l.enabled
       and ((l.scope = 'tool' and l.key in (v_tool, '*'))
            or (l.scope = 'server' and v_server is not null and l.key in (v_server, '*'))
            or (l.scope = 'session' and v_session is not null and l.key in (v_session, '*')))
     order by l.id
  loop
    -- Lock the counter (creating it if need be), moving it to the current window.
    insert into kiwi_internal.rate_limit_counters as c (limit_id, subject, window_start, calls)
    values (v_limit.id, v_limit.subject,
            to_timestamp(floor(extract(epoch from v_now) / v_limit.per_seconds) * v_limit.per_seconds), 0)
    on conflict (limit_id, subject) do update
      set window_start = greatest(c.window_start, excluded.window_start),
          calls = case when c.window_start < excluded.window_start then 0 else c.calls end
    returning c.window_start, c.calls into v_counter;

    v_retry := greatest(0, round(extract(epoch from
                 (v_counter.window_start + make_interval(secs => v_limit.per_seconds)) - v_now)::numeric, 3));
    v_state := jsonb_build_object(
      'id', v_limit.id, 'scope', v_limit.scope, 'key', v_limit.key, 'max_calls', v_limit.max_calls,
      'per_seconds', v_limit.per_seconds, 'calls', v_counter.calls,
      'window_resets_at', v_counter.window_start + make_interval(secs => v_limit.per_seconds),
      'allowed', v_counter.calls < v_limit.max_calls);
    if v_counter.calls >= v_limit.max_calls
       and (v_blocking is null or v_retry > (v_blocking ->> 'retry_after_s')::numeric) then
      v_blocking := v_state || jsonb_build_object('retry_after_s', v_retry);
    end if;
    v_states := v_states || v_state;
    v_ids := v_ids || v_limit.id;
    v_subjects := v_subjects || v_limit.subject;
  end loop;

  if v_blocking is not null then
    return jsonb_build_object(
      'allowed', false,
      'retry_after_s', v_blocking -> 'retry_after_s',
      'limit', v_blocking - 'retry_after_s' - 'allowed',
      'reason', format('rate limit: %s %s allows %s call(s) per %s s; retry in %s s',
                       v_blocking ->> 'scope', v_blocking ->> 'key', v_blocking ->> 'max_calls',
                       v_blocking ->> 'per_seconds', v_blocking ->> 'retry_after_s'),
      'limits', v_states);
  end if;

  -- Every limit has room: take one call from each (the rows are still locked by us).
  update kiwi_internal.rate_limit_counters c
     set calls = c.calls + 1
    from unnest(v_ids, v_subjects) as t(limit_id, subject)
   where c.limit_id = t.limit_id and c.subject = t.subject;

  return jsonb_build_object(
    'allowed', true, 'retry_after_s', null, 'limit', null,
    'limits', (select coalesce(jsonb_agg(s || jsonb_build_object('calls', (s ->> 'calls')::int + 1)), '[]')
                 from jsonb_array_elements(v_states) s));
end
$$;
revoke execute on function kiwi_internal.take_rate_limit(text, text, text) from public;
grant execute on function kiwi_internal.take_rate_limit(text, text, text) to anon, authenticated, service_role;

create function public.take_rate_limit(p_tool_id text, p_server text default null, p_session text default null)
  returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.take_rate_limit(p_tool_id, p_server, p_session);
end
$$;
comment on function public.take_rate_limit(text, text, text) is
  'Take one call of p_tool_id (on MCP server p_server, in session p_session) from every rate limit that applies, atomically: all of them or none. Returns {allowed, retry_after_s (when refused: seconds until the blocking window resets), limit (the blocking limit), reason, limits (each applicable limit''s state)}.';
revoke execute on function public.take_rate_limit(text, text, text) from public;
grant execute on function public.take_rate_limit(text, text, text) to anon, authenticated, service_role;
