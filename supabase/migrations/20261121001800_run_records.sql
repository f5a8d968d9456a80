-- Run records: one row per run of a tool, written by record_run after the run. They say
-- what ran, how it ended and who asked; never what went in or came out (parameters are
-- kept as their sha256 and size only, outputs not at all). Callers read their own runs,
-- admins all of them; rows are never updated, and service_role deletes old ones.

-- Who is asking, as run records name them: the signed-in user's id when the request
-- carries a JWT with a subject (PostgREST: auth.uid()), otherwise `role:` and the role
-- the caller acts as (kiwi_internal.caller_role(): `role:postgres` for the runner's
-- direct connection, `role:service_role` for a service key, which has no subject).
-- A uuid never starts with `role:`, so the two kinds cannot collide.
create function kiwi_internal.caller_identity() returns text
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
begin
  if v_uid is not null then
    return v_uid::text;
  end if;
  return 'role:' || kiwi_internal.caller_role();
end
$$;
comment on function kiwi_internal.caller_identity() is
  'Who is asking: auth.uid() as text when the request has a JWT subject, else role:<the role the caller acts as>.';
revoke execute on function kiwi_internal.caller_identity() from public;
grant execute on function kiwi_internal.caller_identity() to anon, authenticated, service_role;

create table public.tool_runs (
  id             uuid primary key default gen_random_uuid(),
  tool_id        text not null
                 constraint tool_runs_tool_id_length check (char_length(tool_id) between 1 and 300),
  version        text constraint tool_runs_version_length check (char_length(version) <= 128),
  content_hash   text constraint tool_runs_content_hash_format check (content_hash ~ '^[0-9a-f]{64}$'),
  status         text not null
                 constraint tool_runs_status_values check (status in ('success', 'error', 'timeout')),
  exit_code      int,
  duration_ms    double precision
                 constraint tool_runs_duration_ms_range check (duration_ms >= 0 and duration_ms < 'Infinity'),
  error_summary  text constraint tool_runs_error_summary_length check (char_length(error_summary) <= 2000),
  executor_chain text[] constraint tool_runs_executor_chain_length check (cardinality(executor_chain) <= 64),
  primitive      text constraint tool_runs_primitive_length check (char_length(primitive) <= 300),
  params_sha256  text constraint tool_runs_params_sha256_format check (params_sha256 ~ '^[0-9a-f]{64}$'),
  params_size    int constraint tool_runs_params_size_range check (params_size >= 0),
  source         text not null default 'registry'
                 constraint tool_runs_source_values check (source in ('registry', 'project', 'user')),
  caller         text not null,
  caller_role    text not null,
  started_at     timestamptz not null default now(),
  finished_at    timestamptz,
  constraint tool_runs_finished_after_start check (finished_at >= started_at)
);
comment on table public.tool_runs is
  'One row per run of a tool, written through record_run. Callers read their own runs, admins all. No parameter values or outputs are stored: only the parameters'' sha256 and size.';
comment on column public.tool_runs.tool_id is 'The tool as requested or resolved (public/x is stored as x); not a foreign key: runs outlive tools.';
comment on column public.tool_runs.error_summary is 'The error''s first 2000 characters (a longer one ends in …).';
comment on column public.tool_runs.executor_chain is 'The refs from the tool down to its primitive, as the plan resolved them.';
comment on column public.tool_runs.params_sha256 is 'sha256 (hex) of the parameters as the runner serialised them; never the values.';
comment on column public.tool_runs.params_size is 'Size in bytes of the serialised parameters.';
comment on column public.tool_runs.source is 'Where the tool came from: registry, or a local space''s tool.yaml (project or user), which may shadow the registry''s tool of the same name.';
comment on column public.tool_runs.caller is 'Set by the database (kiwi_internal.caller_identity()): a user id, or role:<role> without a JWT subject.';
comment on column public.tool_runs.caller_role is 'The role the caller acted as (anon, authenticated, service_role, postgres ...), set by the database.';

create index tool_runs_caller_started_at_idx on public.tool_runs (caller, started_at desc);
create index tool_runs_tool_id_started_at_idx on public.tool_runs (tool_id, started_at desc);
create index tool_runs_started_at_idx on public.tool_runs (started_at desc);

alter table public.tool_runs enable row level security;
revoke all on table public.tool_runs from public, anon, authenticated, service_role;
grant select on table public.tool_runs to authenticated;
grant select, delete on table public.tool_runs to service_role;

create policy "callers read their own runs, admins all"
  on public.tool_runs for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete runs"
  on public.tool_runs for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- Append-only, for everyone: a run that happened does not change afterwards.
create function kiwi_internal.tool_runs_append_only() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  raise exception 'run records are append-only: run % cannot be changed', old.id
    using errcode = '23514', hint = 'record a new run instead; service_role may delete old runs';
end
$$;
revoke execute on function kiwi_internal.tool_runs_append_only() from public;
create trigger tool_runs_append_only
  before update on public.tool_runs
  for each row execute function kiwi_internal.tool_runs_append_only();

-- Whether a text is a finite timestamp (PostgreSQL 15 has no pg_input_is_valid).
create function kiwi_internal.is_finite_timestamptz(p_text text) returns boolean
  language plpgsql stable
  set search_path = ''
as $$
begin
  return pg_catalog.isfinite(p_text::timestamptz);
exception when others then
  return false;
end
$$;
revoke execute on function kiwi_internal.is_finite_timestamptz(text) from public;
-- Called by the run record checks, inside record_runs (security definer).
grant execute on function kiwi_internal.is_finite_timestamptz(text) to service_role;

-- What is wrong with a run record, each problem named by its field.
create function kiwi_internal.run_problems(p_run jsonb) returns text[]
  language plpgsql stable
  set search_path = ''
as $$
declare
  p     text[] := '{}';
  v_key text;
  v_allowed constant text[] := array[
    'id', 'tool_id', 'version', 'content_hash', 'status', 'exit_code', 'duration_ms', 'error_summary',
    'executor_chain', 'primitive', 'params_sha256', 'params_size', 'source', 'started_at', 'finished_at'];
begin
  if p_run is null or jsonb_typeof(p_run) <> 'object' then
    return array['run: must be a JSON object'];
  end if;

  for v_key in select jsonb_object_keys(p_run) loop
    if not v_key = any (v_allowed) then
      p := p || format('%s: unknown field (allowed: %s)', v_key, array_to_string(v_allowed, ', '));
    end if;
  end loop;

  if jsonb_typeof(p_run -> 'tool_id') is distinct from 'string'
     or kiwi_internal.normalize_ref(p_run ->> 'tool_id') = '' then
    p := p || 'tool_id: required, the tool reference that was run'::text;
  elsif char_length(kiwi_internal.normalize_ref(p_run ->> 'tool_id')) > 300 or (p_run ->> 'tool_id') ~ '[[:cntrl:]]' then
    p := p || 'tool_id: at most 300 characters, no control characters'::text;
  end if;
  if jsonb_typeof(p_run -> 'status') is distinct from 'string'
     or (p_run ->> 'status') not in ('success', 'error', 'timeout') then
    p := p || format('status: required, one of success, error, timeout (got %s)',
                     coalesce((p_run -> 'status')::text, 'nothing'));
  end if;

  -- an id chosen by the client (a random uuid), so a record written behind the run is
  -- known by its id at once
  if jsonb_typeof(p_run -> 'id') not in ('string', 'null')
     or (jsonb_typeof(p_run -> 'id') = 'string'
         and (p_run ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') then
    p := p || 'id: must be a uuid'::text;
  end if;

  -- optional strings (null is the same as absent)
  foreach v_key in array array['version', 'primitive', 'error_summary'] loop
    if jsonb_typeof(p_run -> v_key) not in ('string', 'null') then
      p := p || format('%s: must be a string', v_key);
    end if;
  end loop;
  if jsonb_typeof(p_run -> 'version') = 'string' and char_length(p_run ->> 'version') > 128 then
    p := p || 'version: at most 128 characters'::text;
  end if;
  if jsonb_typeof(p_run -> 'primitive') = 'string' and char_length(p_run ->> 'primitive') > 300 then
    p := p || 'primitive: at most 300 characters'::text;
  end if;
  if jsonb_typeof(p_run -> 'source') not in ('string', 'null')
     or (p_run ->> 'source') not in ('registry', 'project', 'user') then
    p := p || format('source: one of registry, project, user (got %s)', (p_run -> 'source')::text);
  end if;
  foreach v_key in array array['content_hash', 'params_sha256'] loop
    if jsonb_typeof(p_run -> v_key) not in ('string', 'null')
       or (jsonb_typeof(p_run -> v_key) = 'string' and (p_run ->> v_key) !~ '^[0-9a-f]{64}$') then
      p := p || format('%s: must be a sha256 in lower-case hex (64 characters)', v_key);
    end if;
  end loop;

  -- numbers
  if jsonb_typeof(p_run -> 'exit_code') not in ('number', 'null')
     or (jsonb_typeof(p_run -> 'exit_code') = 'number'
         and ((p_run ->> 'exit_code')::numeric <> trunc((p_run ->> 'exit_code')::numeric)
              or (p_run ->> 'exit_code')::numeric not between -2147483648 and 2147483647)) then
    p := p || 'exit_code: must be an integer'::text;
  end if;
  if jsonb_typeof(p_run -> 'duration_ms') not in ('number', 'null')
     or (jsonb_typeof(p_run -> 'duration_ms') = 'number'
         and (p_run ->> 'duration_ms')::numeric not between 0 and 1e12) then
    p := p || 'duration_ms: must be a number of milliseconds from 0 to 1e12 (about 31 years)'::text;
  end if;
  if jsonb_typeof(p_run -> 'params_size') not in ('number', 'null')
     or (jsonb_typeof(p_run -> 'params_size') = 'number'
         and ((p_run ->> 'params_size')::numeric <> trunc((p_run ->> 'params_size')::numeric)
              or (p_run ->> 'params_size')::numeric not between 0 and 2147483647)) then
    p := p || 'params_size: must be a whole number of bytes, 0 or more'::text;
  end if;

  -- the chain
  if jsonb_typeof(p_run -> 'executor_chain') not in ('array', 'null')
     or (jsonb_typeof(p_run -> 'executor_chain') = 'array'
         and (jsonb_array_length(p_run -> 'executor_chain') > 64
              or exists (select 1 from jsonb_array_elements(p_run -> 'executor_chain') e
                          where jsonb_typeof(e) <> 'string' or char_length(e #>> '{}') > 300))) then
    p := p || 'executor_chain: must be a list of at most 64 tool references (strings)'::text;
  end if;

  -- times: ISO 8601 strings
  foreach v_key in array array['started_at', 'finished_at'] loop
    if jsonb_typeof(p_run -> v_key) not in ('string', 'null')
       or (jsonb_typeof(p_run -> v_key) = 'string' and not kiwi_internal.is_finite_timestamptz(p_run ->> v_key)) then
      p := p || format('%s: must be a timestamp such as "2026-11-21T10:00:00Z"', v_key);
    end if;
  end loop;
  return p;
end
$$;
revoke execute on function kiwi_internal.run_problems(jsonb) from public;
grant execute on function kiwi_internal.run_problems(jsonb) to authenticated, service_role;

create function kiwi_internal.record_run(p_run jsonb) returns uuid
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_problems text[] := kiwi_internal.run_problems(p_run);
  v_role     text := kiwi_internal.caller_role();
  v_error    text;
  v_duration double precision;
  v_started  timestamptz;
  v_finished timestamptz;
  v_id       uuid;
begin
  if v_role = 'anon' then
    raise exception 'anonymous callers cannot record runs'
      using errcode = '42501', hint = 'sign in, or run without recording';
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid run record: %', array_to_string(v_problems, '; ')
      using errcode = '22023', detail = to_jsonb(v_problems)::text,
            hint = 'fix the fields named above; nothing was recorded';
  end if;

  -- The record is written when the run has finished: finished_at defaults to now,
  -- started_at to finished_at less the duration; duration_ms is computed only from
  -- two given times (never from a default).
  v_duration := (p_run ->> 'duration_ms')::double precision;
  v_finished := coalesce((p_run ->> 'finished_at')::timestamptz,
                         (p_run ->> 'started_at')::timestamptz + make_interval(secs => v_duration / 1000),
                         greatest(now(), (p_run ->> 'started_at')::timestamptz));
  v_started  := coalesce((p_run ->> 'started_at')::timestamptz,
                         v_finished - make_interval(secs => coalesce(v_duration, 0) / 1000));
  if v_finished < v_started then
    raise exception 'invalid run record: finished_at: % is before started_at %', v_finished, v_started
      using errcode = '22023', hint = 'fix the fields named above; nothing was recorded';
  end if;
  if v_duration is null and jsonb_typeof(p_run -> 'started_at') = 'string'
     and jsonb_typeof(p_run -> 'finished_at') = 'string' then
    v_duration := extract(epoch from v_finished - v_started) * 1000;
  end if;

  v_error := p_run ->> 'error_summary';
  if char_length(v_error) > 2000 then
    v_error := left(v_error, 1999) || '…';
  end if;

  insert into public.tool_runs (id, tool_id, version, content_hash, status, exit_code, duration_ms,
                                error_summary, executor_chain, primitive, params_sha256, params_size, source,
                                caller, caller_role, started_at, finished_at)
  values (coalesce((p_run ->> 'id')::uuid, gen_random_uuid()), kiwi_internal.normalize_ref(p_run ->> 'tool_id'), p_run ->> 'version', p_run ->> 'content_hash',
          p_run ->> 'status', (p_run ->> 'exit_code')::int, v_duration, v_error,
          (select array_agg(e order by n) from jsonb_array_elements_text(p_run -> 'executor_chain')
                                               with ordinality as c(e, n)),
          p_run ->> 'primitive', p_run ->> 'params_sha256', (p_run ->> 'params_size')::int,
          coalesce(p_run ->> 'source', 'registry'), kiwi_internal.caller_identity(), v_role, v_started, v_finished)
  returning id into v_id;
  return v_id;
end
$$;
revoke execute on function kiwi_internal.record_run(jsonb) from public;
grant execute on function kiwi_internal.record_run(jsonb) to authenticated, service_role;

create function public.record_run(p_run jsonb) returns uuid
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.record_run(p_run);
end
$$;
comment on function public.record_run(jsonb) is
  'Record one finished run: {id (optional uuid), tool_id, status (success|error|timeout), version, content_hash, exit_code, duration_ms, error_summary, executor_chain, primitive, params_sha256, params_size, source (registry|project|user), started_at, finished_at}. The database sets who asked; unknown or bad fields are refused by name. Returns the run''s id.';
revoke execute on function public.record_run(jsonb) from public;
grant execute on function public.record_run(jsonb) to authenticated, service_role;

-- Many records in one call: the runner writes its records behind the runs, in batches.
-- All or nothing: one bad record refuses the batch (its error names the field).
create function public.record_runs(p_runs jsonb) returns setof uuid
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_run jsonb;
begin
  if jsonb_typeof(p_runs) is distinct from 'array' then
    raise exception 'invalid run records: must be a JSON array of run records' using errcode = '22023';
  end if;
  for v_run in select r from jsonb_array_elements(p_runs) r loop
    return next kiwi_internal.record_run(v_run);
  end loop;
end
$$;
comment on function public.record_runs(jsonb) is
  'record_run for a JSON array of run records in one call, in order; returns their ids. One bad record refuses them all.';
revoke execute on function public.record_runs(jsonb) from public;
grant execute on function public.record_runs(jsonb) to authenticated, service_role;

-- Views for people in the dashboard. security_invoker: each reader sees only the runs
-- RLS lets them read (their own; admins all).

create view public.recent_runs with (security_invoker = true) as
select r.tool_id, r.version, r.status, r.exit_code,
       round(r.duration_ms::numeric, 1) as duration_ms,
       r.error_summary, r.caller, r.started_at, r.id
  from public.tool_runs r
 order by r.started_at desc, r.id;
comment on view public.recent_runs is 'Runs you may read, newest first: what ran, how it ended, how long it took and who asked.';
grant select on public.recent_runs to authenticated, service_role;

create view public.run_summary with (security_invoker = true) as
select r.tool_id,
       count(*) as runs,
       count(*) filter (where r.status = 'success') as successes,
       count(*) filter (where r.status = 'error') as errors,
       count(*) filter (where r.status = 'timeout') as timeouts,
       round((count(*) filter (where r.status <> 'success'))::numeric / count(*), 3) as failure_rate,
       round((percentile_cont(0.5) within group (order by r.duration_ms))::numeric, 1) as p50_duration_ms,
       round((percentile_cont(0.95) within group (order by r.duration_ms))::numeric, 1) as p95_duration_ms,
       max(r.started_at) as last_run_at,
       (array_agg(r.error_summary order by r.started_at desc)
          filter (where r.status <> 'success' and r.error_summary is not null))[1] as last_error
  from public.tool_runs r
 where r.started_at >= now() - interval '7 days'
 group by r.tool_id
 order by r.tool_id;
comment on view public.run_summary is
  'Per tool, over the runs of the last 7 days you may read: counts by status, failure_rate (errors and timeouts over runs, 0..1), median and 95th percentile duration, the last run and the last error.';
grant select on public.run_summary to authenticated, service_role;
