-- Schedules: a tool run on a cron expression, in a time zone, as the person who scheduled
-- it. One function enqueues what is due (queue_tick): hosted Supabase calls it from pg_cron
-- every second when pg_cron is there (below); locally, where pg_cron cannot run, every
-- `kiwi worker` calls it, and a transaction advisory lock lets one at a time in. A tick is
-- queued once however many call: the schedule's row is locked while it is advanced, and
-- queued_runs holds (schedule_id, scheduled_for) unique.
--
-- Expressions: five cron fields (minute hour day-of-month month day-of-week; `*`, `a`, `a-b`,
-- `*/n`, `a-b/n` and lists; day-of-week 0-7, 0 and 7 Sunday; when both day fields are
-- restricted either may match), or pg_cron's `N seconds` (1 to 59).

create function kiwi_internal.cron_field(p_field text, p_min int, p_max int, p_name text) returns int[]
  language plpgsql immutable
  set search_path = ''
as $$
declare
  v_part  text;
  v_range text;
  v_step  int;
  v_lo    int;
  v_hi    int;
  v_out   int[] := '{}';
  v_m     text[];
begin
  if p_field is null or p_field = '' then
    raise exception 'cron %: empty', p_name using errcode = '22023';
  end if;
  foreach v_part in array string_to_array(p_field, ',') loop
    v_m := regexp_match(v_part, '^(\*|[0-9]{1,2}(?:-[0-9]{1,2})?)(?:/([0-9]{1,2}))?$');
    if v_m is null then
      raise exception 'cron %: "%" is not a value, a range, * or a step (such as */5)', p_name, v_part
        using errcode = '22023';
    end if;
    v_range := v_m[1];
    v_step := coalesce(v_m[2]::int, 1);
    if v_step < 1 then
      raise exception 'cron %: a step must be at least 1', p_name using errcode = '22023';
    end if;
    if v_range = '*' then
      v_lo := p_min; v_hi := p_max;
    elsif position('-' in v_range) > 0 then
      v_lo := split_part(v_range, '-', 1)::int; v_hi := split_part(v_range, '-', 2)::int;
    else
      v_lo := v_range::int; v_hi := case when v_m[2] is null then v_lo else p_max end;
    end if;
    if v_lo < p_min or v_hi > p_max or v_lo > v_hi then
      raise exception 'cron %: % is outside %-%', p_name, v_part, p_min, p_max using errcode = '22023';
    end if;
    v_out := v_out || array(select generate_series(v_lo, v_hi, v_step));
  end loop;
  return array(select distinct x from unnest(v_out) as x order by x);
end
$$;
revoke execute on function kiwi_internal.cron_field(text, int, int, text) from public;

-- The first time after p_after that the expression names, in time zone p_tz.
create function kiwi_internal.cron_next(p_expr text, p_tz text, p_after timestamptz) returns timestamptz
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_f       text[] := regexp_split_to_array(btrim(coalesce(p_expr, '')), '\s+');
  v_secs    text[] := regexp_match(btrim(coalesce(p_expr, '')), '^([0-9]{1,2}) seconds?$');
  v_minutes int[];
  v_hours   int[];
  v_doms    int[];
  v_months  int[];
  v_dows    int[];
  v_local   timestamp;
  v_day     date;
  v_h       int;
  v_mi      int;
  v_at      timestamptz;
  v_n       int;
begin
  if not exists (select 1 from pg_catalog.pg_timezone_names z where z.name = p_tz) then
    raise exception 'time zone "%" is not known', p_tz using errcode = '22023',
      hint = 'an IANA name such as UTC, Europe/Paris or America/New_York';
  end if;
  if v_secs is not null then
    v_n := v_secs[1]::int;
    if v_n not between 1 and 59 then
      raise exception 'cron: "% seconds" must be 1 to 59 seconds', v_n using errcode = '22023';
    end if;
    return to_timestamp((floor(extract(epoch from p_after) / v_n) + 1) * v_n);
  end if;
  if cardinality(v_f) <> 5 then
    raise exception 'cron: "%" needs five fields (minute hour day-of-month month day-of-week) or "N seconds"', p_expr
      using errcode = '22023';
  end if;
  v_minutes := kiwi_internal.cron_field(v_f[1], 0, 59, 'minute');
  v_hours := kiwi_internal.cron_field(v_f[2], 0, 23, 'hour');
  v_doms := kiwi_internal.cron_field(v_f[3], 1, 31, 'day of month');
  v_months := kiwi_internal.cron_field(v_f[4], 1, 12, 'month');
  v_dows := array(select distinct x % 7 from unnest(kiwi_internal.cron_field(v_f[5], 0, 7, 'day of week')) as x);
  v_local := date_trunc('minute', p_after at time zone p_tz) + interval '1 minute';
  v_day := v_local::date;
  for i in 0 .. 366 * 5 loop
    if extract(month from v_day)::int = any (v_months)
       and (case when v_f[3] <> '*' and v_f[5] <> '*'
                   then extract(day from v_day)::int = any (v_doms) or extract(dow from v_day)::int = any (v_dows)
                 else extract(day from v_day)::int = any (v_doms) and extract(dow from v_day)::int = any (v_dows) end) then
      foreach v_h in array v_hours loop
        foreach v_mi in array v_minutes loop
          v_at := (v_day + make_time(v_h, v_mi, 0)) at time zone p_tz;
          if v_at > p_after then
            return v_at;
          end if;
        end loop;
      end loop;
    end if;
    v_day := v_day + 1;
  end loop;
  raise exception 'cron: "%" names no time in the next five years', p_expr using errcode = '22023';
end
$$;
revoke execute on function kiwi_internal.cron_next(text, text, timestamptz) from public;
grant execute on function kiwi_internal.cron_next(text, text, timestamptz) to authenticated, service_role;

create table public.schedules (
  id          uuid primary key default gen_random_uuid(),
  name        text not null constraint schedules_name_format
              check (char_length(name) between 1 and 100 and btrim(name) <> '' and name !~ '[[:cntrl:]]'),
  owner       text not null,
  cron        text not null constraint schedules_cron_length check (char_length(cron) <= 200),
  time_zone   text not null default 'UTC',
  tool_id     text not null constraint schedules_tool_id_length check (char_length(tool_id) between 1 and 300),
  version     text constraint schedules_version_length check (char_length(version) <= 128),
  params      jsonb not null default '{}'
              constraint schedules_params_object
              check (jsonb_typeof(params) = 'object' and octet_length(params::text) <= 65536),
  enabled     boolean not null default true,
  next_run_at timestamptz not null,
  last_run_at timestamptz,
  created_at  timestamptz not null default clock_timestamp(),
  constraint schedules_owner_name_key unique (owner, name)
);
comment on table public.schedules is
  'Tools run on a schedule (cron, in time_zone), as their owner: a pinned version or the latest (version null). Owners read and change their own, admins all; written through add_schedule, set_schedule_enabled and remove_schedule.';
comment on column public.schedules.owner is 'Who scheduled it (set by the database from the JWT claims): the runs act as them.';
alter table public.schedules enable row level security;
revoke all on table public.schedules from public, anon, authenticated, service_role;
grant select on table public.schedules to authenticated, service_role;
create index schedules_due_idx on public.schedules (next_run_at) where enabled;
create policy "owners read their schedules, admins all"
  on public.schedules for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or owner = (select kiwi_internal.caller_identity()));

-- The claims a schedule's runs act with (the owner's, when it was added); never shown.
create table kiwi_internal.schedule_claims (
  schedule_id uuid primary key references public.schedules (id) on delete cascade,
  claims      jsonb not null
);
alter table kiwi_internal.schedule_claims enable row level security;
revoke all on table kiwi_internal.schedule_claims from public, anon, authenticated, service_role;
-- read and written only by the schedules' security-definer functions
create policy "no API role reads or writes schedules' claims"
  on kiwi_internal.schedule_claims for all to anon, authenticated, service_role using (false) with check (false);

create function kiwi_internal.add_schedule(p jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row    public.schedules;
  v_tz     text := coalesce(p ->> 'time_zone', 'UTC');
  v_claims jsonb := kiwi_internal.request_claims() - array['exp', 'iat', 'nbf', 'jti'];
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot schedule runs' using errcode = '42501', hint = 'sign in first';
  end if;
  if jsonb_typeof(p) is distinct from 'object' or jsonb_typeof(p -> 'tool_id') is distinct from 'string'
     or jsonb_typeof(p -> 'cron') is distinct from 'string' or jsonb_typeof(p -> 'name') is distinct from 'string' then
    raise exception 'add_schedule: name, cron and tool_id are required strings' using errcode = '22023';
  end if;
  if char_length(p ->> 'name') not between 1 and 100 or btrim(p ->> 'name') = '' or (p ->> 'name') ~ '[[:cntrl:]]' then
    raise exception 'a schedule''s name must be 1 to 100 characters, not blank, with no control characters (got "%")',
      left(regexp_replace(p ->> 'name', '[[:cntrl:]]', '?', 'g'), 100)
      using errcode = '22023', hint = 'name it in words: kiwi schedule add nightly-report TOOL --cron ...';
  end if;
  if coalesce(jsonb_typeof(p -> 'params'), 'object') <> 'object' then
    raise exception 'add_schedule: params must be a JSON object' using errcode = '22023';
  end if;
  if (kiwi_internal.readable_tool(p ->> 'tool_id')).ref is null then
    raise exception 'tool % not found', p ->> 'tool_id' using errcode = 'PT404',
      hint = 'search for it with `kiwi search`';
  end if;
  insert into public.schedules (name, owner, cron, time_zone, tool_id, version, params, enabled, next_run_at)
  values (p ->> 'name', kiwi_internal.caller_identity(), btrim(p ->> 'cron'), v_tz,
          kiwi_internal.normalize_ref(p ->> 'tool_id'), p ->> 'version', coalesce(p -> 'params', '{}'::jsonb),
          coalesce((p ->> 'enabled')::boolean, true),
          kiwi_internal.cron_next(p ->> 'cron', v_tz, clock_timestamp()))
  returning * into v_row;
  insert into kiwi_internal.schedule_claims (schedule_id, claims) values (v_row.id, v_claims);
  return to_jsonb(v_row);
exception when unique_violation then
  raise exception 'you already have a schedule named "%"', p ->> 'name' using errcode = 'PT409',
    hint = 'remove it first (kiwi schedule rm), or choose another name';
end
$$;
revoke execute on function kiwi_internal.add_schedule(jsonb) from public;
grant execute on function kiwi_internal.add_schedule(jsonb) to authenticated, service_role;

create function public.add_schedule(p jsonb) returns jsonb
  language sql volatile set search_path = ''
as $$ select kiwi_internal.add_schedule(p) $$;
comment on function public.add_schedule(jsonb) is
  'Schedule a tool you may read: {name, cron (five fields, or "N seconds"), time_zone (IANA, default UTC), tool_id, version (null: the latest at each tick), params, enabled}. Its runs are queued as you. Returns the schedule with its next_run_at.';
revoke execute on function public.add_schedule(jsonb) from public;
grant execute on function public.add_schedule(jsonb) to authenticated, service_role;

-- The schedule by id or by the caller's name for it, if the caller may change it.
create function kiwi_internal.my_schedule(p_ref text) returns public.schedules
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row public.schedules;
  v_id  uuid;
begin
  if p_ref ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' then
    v_id := p_ref::uuid;  -- cast here, never in the query: its planner may fold the cast of any name
  end if;
  select * into v_row from public.schedules s
   where (s.name = p_ref and s.owner = kiwi_internal.caller_identity())
      or (s.id = v_id and (kiwi_internal.caller_is_admin() or s.owner = kiwi_internal.caller_identity()))
   order by (s.name = p_ref) desc
   limit 1
     for update;
  if not found then
    raise exception 'schedule % not found', p_ref using errcode = 'PT404', hint = 'list yours with `kiwi schedule list`';
  end if;
  return v_row;
end
$$;
revoke execute on function kiwi_internal.my_schedule(text) from public;

create function kiwi_internal.set_schedule_enabled(p_ref text, p_enabled boolean) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.schedules := kiwi_internal.my_schedule(p_ref);
begin
  update public.schedules s
     set enabled = p_enabled,
         next_run_at = case when p_enabled and not s.enabled
                            then kiwi_internal.cron_next(s.cron, s.time_zone, clock_timestamp()) else s.next_run_at end
   where s.id = v_row.id returning * into v_row;
  return to_jsonb(v_row);
end
$$;
revoke execute on function kiwi_internal.set_schedule_enabled(text, boolean) from public;
grant execute on function kiwi_internal.set_schedule_enabled(text, boolean) to authenticated, service_role;

create function public.set_schedule_enabled(p_ref text, p_enabled boolean) returns jsonb
  language sql volatile set search_path = ''
as $$ select kiwi_internal.set_schedule_enabled(p_ref, p_enabled) $$;
comment on function public.set_schedule_enabled(text, boolean) is
  'Pause (false) or resume (true) a schedule of yours, by name or id; resumed, it next runs at its next tick from now.';
revoke execute on function public.set_schedule_enabled(text, boolean) from public;
grant execute on function public.set_schedule_enabled(text, boolean) to authenticated, service_role;

create function kiwi_internal.remove_schedule(p_ref text) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.schedules := kiwi_internal.my_schedule(p_ref);
begin
  delete from public.schedules s where s.id = v_row.id;
  return to_jsonb(v_row);
end
$$;
revoke execute on function kiwi_internal.remove_schedule(text) from public;
grant execute on function kiwi_internal.remove_schedule(text) to authenticated, service_role;

create function public.remove_schedule(p_ref text) returns jsonb
  language sql volatile set search_path = ''
as $$ select kiwi_internal.remove_schedule(p_ref) $$;
comment on function public.remove_schedule(text) is
  'Remove a schedule of yours, by name or id (runs already queued stay). Returns what was removed.';
revoke execute on function public.remove_schedule(text) from public;
grant execute on function public.remove_schedule(text) to authenticated, service_role;

-- Queue every due tick once, and advance each schedule to its next tick after now (ticks
-- missed while nothing called this are not made up: one run, then the next from now).
create function kiwi_internal.enqueue_due_schedules() returns int
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_s   public.schedules;
  v_n   int := 0;
  v_now timestamptz := clock_timestamp();  -- a value the planner can compare with an index
begin
  for v_s in select * from public.schedules s
              where s.enabled and s.next_run_at <= v_now
              order by s.next_run_at
                for update skip locked loop
    begin
      perform kiwi_internal.enqueue_run(
        jsonb_build_object('tool_id', v_s.tool_id, 'version', v_s.version, 'params', v_s.params,
                           'schedule_id', v_s.id, 'scheduled_for', v_s.next_run_at,
                           'session_id', 'schedule:' || v_s.id),
        coalesce((select c.claims from kiwi_internal.schedule_claims c where c.schedule_id = v_s.id),
                 '{"role": "anon"}'::jsonb));
      v_n := v_n + 1;
    exception when unique_violation then
      null;  -- this tick is queued already
    end;
    update public.schedules s
       set last_run_at = v_s.next_run_at,
           next_run_at = kiwi_internal.cron_next(s.cron, s.time_zone, greatest(clock_timestamp(), v_s.next_run_at))
     where s.id = v_s.id;
  end loop;
  return v_n;
end
$$;
revoke execute on function kiwi_internal.enqueue_due_schedules() from public;

-- The queue's housekeeping, one caller at a time: due schedules, runs whose approval
-- expired, ended runs past their keep_until, archived messages older than a week. Returns what it did, or {skipped: true} when
-- another caller holds the lock.
create function kiwi_internal.queue_tick() returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_queued  int;
  v_expired int;
  v_purged  int;
  -- a value, not clock_timestamp() in the conditions: a volatile call there cannot be an index
  -- condition, and each purge would read its whole table, every second, by every worker
  v_now     timestamptz := clock_timestamp();
begin
  perform kiwi_internal.refuse_unless_admin('queue_tick');
  if not pg_try_advisory_xact_lock(hashtext('kiwi.queue_tick')) then
    return jsonb_build_object('skipped', true);
  end if;
  v_queued := kiwi_internal.enqueue_due_schedules();
  v_expired := kiwi_internal.end_runs_of_expired_approvals();
  delete from public.queued_runs r
   where r.keep_until < v_now and r.status in ('success', 'error', 'timeout', 'cancelled', 'dead');
  get diagnostics v_purged = row_count;
  -- pgmq keeps archived messages forever: a week of them is enough to look back on
  delete from pgmq.a_kiwi_runs a where a.archived_at < v_now - interval '7 days';
  return jsonb_build_object('skipped', false, 'queued', v_queued, 'expired', v_expired, 'purged', v_purged);
end
$$;
revoke execute on function kiwi_internal.queue_tick() from public;
grant execute on function kiwi_internal.queue_tick() to service_role;

create function public.queue_tick() returns jsonb
  language sql volatile set search_path = ''
as $$ select kiwi_internal.queue_tick() $$;
comment on function public.queue_tick() is
  'The queue''s housekeeping (admins; pg_cron or kiwi worker call it): queue due schedules once each, end runs whose approval expired, purge ended runs past keep_until.';
revoke execute on function public.queue_tick() from public;
grant execute on function public.queue_tick() to service_role;

-- Where pg_cron is (hosted Supabase: Supabase Cron), it calls queue_tick every second.
do $$
begin
  if exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
    perform cron.schedule('kiwi-queue-tick', '1 seconds', 'select public.queue_tick()');
  end if;
end
$$;

create function public.my_schedules() returns jsonb
  language sql stable
  set search_path = ''
as $$
  select coalesce(jsonb_agg(to_jsonb(s) order by s.name, s.id), '[]'::jsonb) from public.schedules s
$$;
comment on function public.my_schedules() is 'The schedules you may read (your own; admins all), by name.';
revoke execute on function public.my_schedules() from public;
grant execute on function public.my_schedules() to authenticated, service_role;
