-- Rate limits, declared as data and enforced in Postgres, so that every Kiwi process
-- (several MCP servers, CLIs, machines) shares the same counters.
--
-- A limit is a row of public.rate_limits: at most max_calls calls per per_seconds, for
--   scope 'tool'    key = a tool reference: calls of that tool;
--   scope 'server'  key = an mcp_server reference: calls of any of its tools;
--   scope 'session' key = a session id: calls made in that session.
-- key '*' applies the limit to every tool / server / session, each counted on its own.
--
-- Whose bucket a call is counted in. A counter is one limit and one subject:
--   shared      subject = the tool or server reference: the tool-wide and server-wide
--               counters that signed-in callers draw from together. Only the gate,
--               public.check_call (300_check_call.sql), takes from them, and only
--               for a signed-in caller (authenticated, service_role or another admin) calling
--               a tool it may read, in a call that runs: a dry run, a call held for approval
--               and a refused one take nothing.
--   own         subject = the owner, a space, the tool or server reference. Every call
--               through public.take_rate_limit is counted in the caller's own buckets
--               (owner: kiwi_internal.caller_identity(), the user id or role:<role>), so
--               nobody uses up a limit for anyone else through it: 12 anonymous calls of
--               word_count no longer lock it for everyone. The gate counts anonymous callers
--               in buckets of their own as well, all of them together as 'role:anon', so
--               they can never exhaust a signed-in user's shared bucket; and it counts a
--               call of a tool the caller cannot read (an unpublished local tool, or another
--               namespace's private one) in the caller's own buckets, so that naming a tool
--               drains nothing of its users.
--   session     subject = the caller's identity (anonymous: role:anon), a space, the session
--               id, in both: one caller cannot use up another's session by naming it.
-- Identities and references hold no space, so the subjects of two owners never collide.
--
-- A call is checked against every limit that applies and takes one call from all of them,
-- or from none: each counter row is locked (an upsert, in a fixed order, so two callers
-- never deadlock), and only when every limit has room is the call counted
-- (rate_limit_check, then rate_limit_take while the rows are still locked; the gate takes
-- only once it knows the call goes on). A refused call says when to retry.
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

alter table public.rate_limits enable row level security;
revoke all on table public.rate_limits from public, anon, authenticated, service_role;
grant select on table public.rate_limits to authenticated;
grant select, insert, update, delete on table public.rate_limits to service_role;

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

-- The counters: one row per limit and subject (whose bucket: see the top of this file),
-- holding the current window and the calls taken in it. Private: only take_rate_limit and
-- check_call touch them.
create table kiwi_internal.rate_limit_counters (
  limit_id      uuid not null references public.rate_limits (id) on delete cascade,
  subject       text not null,
  window_start  timestamptz not null,
  calls         int not null default 0 check (calls >= 0),
  primary key (limit_id, subject)
);
comment on table kiwi_internal.rate_limit_counters is
  'Calls taken per rate limit and subject (a shared tool or server reference, or an owner, a space and what is counted) in the current fixed window; written only by take_rate_limit and check_call.';
revoke all on table kiwi_internal.rate_limit_counters from public, anon, authenticated, service_role;

-- Whose own buckets the caller's calls are counted in: anonymous callers all together as
-- role:anon (whatever their claims say), anyone else as kiwi_internal.caller_identity().
create function kiwi_internal.bucket_owner() returns text
  language plpgsql stable
  set search_path = ''
as $$
begin
  return case when kiwi_internal.caller_role() = 'anon' then 'role:anon' else kiwi_internal.caller_identity() end;
end
$$;
revoke execute on function kiwi_internal.bucket_owner() from public, anon, authenticated, service_role;

-- Every limit that applies to a call, with its counter locked (created if need be and
-- moved to the current window), in a fixed order. p_owner is whose buckets: null for the
-- shared ones. Takes nothing: answers {allowed, retry_after_s, limit (the blocking one),
-- reason, limits (each one's state), counters ([{limit_id, subject}] for rate_limit_take)}.
-- Since p_owner chooses whose bucket is counted, no API role executes it: only
-- take_rate_limit and check_call, which compute the owner from the session, call it.
create function kiwi_internal.rate_limit_check(p_tool text, p_server text, p_session text, p_owner text)
  returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_now      timestamptz := clock_timestamp();
  v_limit    record;
  v_counter  record;
  v_states   jsonb := '[]';
  v_state    jsonb;
  v_blocking jsonb;
  v_retry    numeric;
  v_counters jsonb := '[]';
begin
  for v_limit in
    select l.id, l.scope, l.key, l.max_calls, l.per_seconds,
           case l.scope when 'tool' then concat_ws(' ', p_owner, p_tool)
                        when 'server' then concat_ws(' ', p_owner, p_server)
                        else coalesce(p_owner, kiwi_internal.caller_identity()) || ' ' || p_session end as subject
      from public.rate_limits l
     where l.enabled
       and ((l.scope = 'tool' and l.key in (p_tool, '*'))
            or (l.scope = 'server' and p_server is not null and l.key in (p_server, '*'))
            or (l.scope = 'session' and p_session is not null and l.key in (p_session, '*')))
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
    v_counters := v_counters || jsonb_build_object('limit_id', v_limit.id, 'subject', v_limit.subject);
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
  return jsonb_build_object('allowed', true, 'retry_after_s', null, 'limit', null, 'limits', v_states,
                            'counters', v_counters);
end
$$;
revoke execute on function kiwi_internal.rate_limit_check(text, text, text, text)
  from public, anon, authenticated, service_role;

-- Take one call from every counter an allowing rate_limit_check locked (in the same
-- transaction, so they still have room), and answer as take_rate_limit does.
create function kiwi_internal.rate_limit_take(p_check jsonb) returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  update kiwi_internal.rate_limit_counters c
     set calls = c.calls + 1
    from jsonb_to_recordset(p_check -> 'counters') as t(limit_id uuid, subject text)
   where c.limit_id = t.limit_id and c.subject = t.subject;
  return (p_check - 'counters') || jsonb_build_object(
    'limits', (select coalesce(jsonb_agg(s || jsonb_build_object('calls', (s ->> 'calls')::int + 1)), '[]')
                 from jsonb_array_elements(p_check -> 'limits') s));
end
$$;
revoke execute on function kiwi_internal.rate_limit_take(jsonb) from public, anon, authenticated, service_role;

-- A call counted in the caller's own buckets (see the top of this file), all or none.
create function kiwi_internal.take_rate_limit(p_tool_id text, p_server text, p_session text) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_tool    text := kiwi_internal.normalize_ref(p_tool_id);
  v_server  text := nullif(kiwi_internal.normalize_ref(p_server), '');
  v_session text := nullif(btrim(p_session), '');
  v_check   jsonb;
begin
  if v_tool is null or v_tool = '' then
    raise exception 'take_rate_limit: p_tool_id is required' using errcode = '22023',
      hint = 'name the tool being called';
  end if;
  if char_length(v_tool) > 300 or char_length(v_server) > 300 or char_length(v_session) > 200 then
    raise exception 'take_rate_limit: tool and server at most 300 characters, session at most 200'
      using errcode = '22023';
  end if;
  v_check := kiwi_internal.rate_limit_check(v_tool, v_server, v_session, kiwi_internal.bucket_owner());
  if not (v_check ->> 'allowed')::boolean then
    return v_check;
  end if;
  return kiwi_internal.rate_limit_take(v_check);
end
$$;
revoke execute on function kiwi_internal.take_rate_limit(text, text, text) from public;
-- It counts only in the caller's own buckets (bucket_owner, from the session), so every
-- API role may call it.
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
  'Take one call of p_tool_id (on MCP server p_server, in session p_session) from every rate limit that applies, atomically: all of them or none, counted in the caller''s own buckets (the shared tool-wide and server-wide counters are taken only by check_call). Returns {allowed, retry_after_s (when refused: seconds until the blocking window resets), limit (the blocking limit), reason, limits (each applicable limit''s state)}.';
revoke execute on function public.take_rate_limit(text, text, text) from public;
grant execute on function public.take_rate_limit(text, text, text) to anon, authenticated, service_role;
