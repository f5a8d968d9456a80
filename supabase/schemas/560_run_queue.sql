-- The run queue: a run that is queued instead of awaited. Its row here and its message on
-- the pgmq queue `kiwi_runs` are written in one transaction (enqueue_run); `kiwi worker`
-- processes, anywhere that reaches the database, take messages (worker_take) with a
-- visibility timeout, run them through the same gate and sandbox as a direct run, as the
-- caller who queued them, and finish them (worker_finish): the result, the run record and
-- the message's archive in one transaction, for the attempt that holds the run only, so a
-- result is recorded exactly once however many workers took the message.
--
-- A worker that dies loses nothing: its message becomes visible again after its timeout
-- and another worker takes it (the attempt count goes up; a run taken more than
-- max_deliveries times is dead-lettered). A failure the tool's manifest marks retryable
-- (config.requeue: attempts, backoff, on) is tried again after a backoff that doubles; after
-- the last attempt the run is dead-lettered with its reason.
--
-- Only the pgmq API hosted Supabase's pgmq 1.5.1 shares with the local 1.13.0 is used:
-- create, send, read, archive, delete, set_vt, metrics.
--
-- Who: callers queue runs as themselves (the database takes who from the JWT claims and
-- keeps the claims for the worker, which acts as that caller); callers read and cancel
-- their own queued runs, admins all. The worker functions are admin-only (service_role,
-- the runner's own connection). Parameters and claims live in a private table the API
-- never shows, and are deleted once the run has ended.

select pgmq.create('kiwi_runs');

create table public.queued_runs (
  id                  uuid primary key default gen_random_uuid(),
  tool_id             text not null
                      constraint queued_runs_tool_id_length check (char_length(tool_id) between 1 and 300),
  version             text constraint queued_runs_version_length check (char_length(version) <= 128),
  status              text not null default 'queued'
                      constraint queued_runs_status_values check (status in (
                        'queued', 'running', 'retrying', 'waiting_approval',
                        'success', 'error', 'timeout', 'cancelled', 'dead')),
  caller              text not null,
  caller_role         text not null,
  session_id          text constraint queued_runs_session_length check (char_length(session_id) <= 200),
  attempt             int not null default 0,
  max_attempts        int not null default 1
                      constraint queued_runs_max_attempts_range check (max_attempts between 1 and 10),
  max_deliveries      int not null default 5
                      constraint queued_runs_max_deliveries_range check (max_deliveries between 1 and 100),
  msg_id              bigint,
  worker_id           uuid,
  approval_id         uuid,
  context_id          uuid,
  progress_token      jsonb
                      constraint queued_runs_progress_token_shape check (
                        jsonb_typeof(progress_token) in ('string', 'number')
                        and octet_length(progress_token::text) <= 200),
  schedule_id         uuid,
  scheduled_for       timestamptz,
  -- the W3C trace context the run was queued in (an MCP request's): the worker's spans continue it
  traceparent         text
                      constraint queued_runs_traceparent_format
                      check (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'),
  queued_at           timestamptz not null default clock_timestamp(),
  started_at          timestamptz,
  finished_at         timestamptz,
  next_attempt_at     timestamptz,
  cancel_requested_at timestamptz,
  keep_until          timestamptz not null default clock_timestamp() + interval '1 day',
  result              jsonb constraint queued_runs_result_size check (octet_length(result::text) <= 4194304),
  error               text constraint queued_runs_error_length check (char_length(error) <= 2000),
  constraint queued_runs_finished_have_a_time
    check ((status in ('success', 'error', 'timeout', 'cancelled', 'dead')) = (finished_at is not null))
);
comment on table public.queued_runs is
  'Runs queued instead of awaited (enqueue_run), and how each stands: queued, running, retrying, waiting_approval, then success, error, timeout, cancelled or dead (dead-lettered). Callers read their own, admins all; written only through the queue''s functions.';
comment on column public.queued_runs.result is
  'The run''s answer as the caller would have had it (output, error, exit code, warnings), secrets masked; kept until keep_until.';
comment on column public.queued_runs.attempt is 'How many times a worker has taken the run; only the latest attempt may finish it.';
comment on column public.queued_runs.caller is 'Set by the database from the JWT claims (kiwi_internal.caller_identity()) when the run was queued.';
comment on column public.queued_runs.context_id is
  'The execution context the run is checked against (a directive''s permissions), as the call that queued it named it.';
comment on column public.queued_runs.progress_token is
  'The MCP progress token of the task-augmented tools/call that queued the run, for the progress notifications of whoever waits for it.';

alter table public.queued_runs enable row level security;
revoke all on table public.queued_runs from public, anon, authenticated, service_role;
grant select on table public.queued_runs to authenticated, service_role;
grant delete on table public.queued_runs to service_role;

create index queued_runs_caller_queued_at_idx on public.queued_runs (caller, queued_at desc);
create index queued_runs_open_idx on public.queued_runs (status)
  where status in ('queued', 'running', 'retrying', 'waiting_approval');
create index queued_runs_open_caller_idx on public.queued_runs (caller)
  where status in ('queued', 'running', 'retrying', 'waiting_approval');
create index queued_runs_approval_idx on public.queued_runs (approval_id) where approval_id is not null;
create index queued_runs_keep_until_idx on public.queued_runs (keep_until);
-- a schedule's tick runs once, however many workers and instances enqueue what is due
create unique index queued_runs_schedule_tick_key on public.queued_runs (schedule_id, scheduled_for)
  where schedule_id is not null;

create policy "callers read their own queued runs, admins all"
  on public.queued_runs for select to authenticated, service_role
  using ((select kiwi_internal.caller_is_admin()) or caller = (select kiwi_internal.caller_identity()));
create policy "admins delete queued runs"
  on public.queued_runs for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- What a worker needs and nobody reads: the parameters and the claims the run was queued
-- with. Deleted when the run ends.
create table kiwi_internal.queued_run_inputs (
  run_id uuid primary key references public.queued_runs (id) on delete cascade,
  params jsonb not null constraint queued_run_inputs_params_size check (octet_length(params::text) <= 1048576),
  claims jsonb not null
);
comment on table kiwi_internal.queued_run_inputs is
  'The parameters and JWT claims of a queued run, for the worker that runs it as its caller; never exposed, deleted when the run ends.';
alter table kiwi_internal.queued_run_inputs enable row level security;
revoke all on table kiwi_internal.queued_run_inputs from public, anon, authenticated, service_role;
-- read and written only by the queue's security-definer functions, which bypass RLS as its owner
create policy "no API role reads or writes queued runs' inputs"
  on kiwi_internal.queued_run_inputs for all to anon, authenticated, service_role using (false) with check (false);

-- What a running run reported: progress, log lines, changes of status (for the task's poller).
create table public.queued_run_events (
  id       bigint generated always as identity primary key,
  run_id   uuid not null references public.queued_runs (id) on delete cascade,
  at       timestamptz not null default clock_timestamp(),
  kind     text not null constraint queued_run_events_kind_values check (kind in ('progress', 'log', 'status')),
  message  text constraint queued_run_events_message_length check (char_length(message) <= 2000),
  progress double precision,
  total    double precision
);
comment on table public.queued_run_events is
  'What a queued run reported while it ran (progress, log lines, status changes), for whoever polls it; at most 500 a run. Readable with the run.';
alter table public.queued_run_events enable row level security;
revoke all on table public.queued_run_events from public, anon, authenticated, service_role;
grant select on table public.queued_run_events to authenticated, service_role;
create index queued_run_events_run_idx on public.queued_run_events (run_id, id);
create policy "events are read with their run"
  on public.queued_run_events for select to authenticated, service_role
  using (exists (select 1 from public.queued_runs r where r.id = run_id));

create function kiwi_internal.queued_run_json(p_row public.queued_runs) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select jsonb_build_object(
    'id', p_row.id, 'tool_id', p_row.tool_id, 'version', p_row.version, 'status', p_row.status,
    'attempt', p_row.attempt, 'max_attempts', p_row.max_attempts, 'approval_id', p_row.approval_id,
    'schedule_id', p_row.schedule_id, 'scheduled_for', p_row.scheduled_for, 'queued_at', p_row.queued_at, 'started_at', p_row.started_at,
    'finished_at', p_row.finished_at, 'next_attempt_at', p_row.next_attempt_at,
    'cancel_requested', p_row.cancel_requested_at is not null, 'keep_until', p_row.keep_until,
    'context_id', p_row.context_id, 'progress_token', p_row.progress_token, 'traceparent', p_row.traceparent,
    'error', p_row.error, 'result', p_row.result,
    'last_event', (select jsonb_build_object('id', e.id, 'at', e.at, 'kind', e.kind, 'message', e.message)
                     from public.queued_run_events e
                    where e.run_id = p_row.id
                    order by e.id desc
                    limit 1))
$$;
revoke execute on function kiwi_internal.queued_run_json(public.queued_runs) from public;
grant execute on function kiwi_internal.queued_run_json(public.queued_runs) to authenticated, service_role;

-- Queue a run as the caller: the row, its inputs and the message in one transaction.
-- p: {tool_id, version, params, session_id, max_attempts, keep_s, schedule_id, context,
-- approval_id, progress_token, traceparent}; the caller and its claims come from the request, never from p.
create function kiwi_internal.enqueue_run(p jsonb, p_claims jsonb) returns public.queued_runs
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row  public.queued_runs;
  v_keep double precision := coalesce((p ->> 'keep_s')::double precision, 86400);
begin
  if jsonb_typeof(p) is distinct from 'object' then
    raise exception 'enqueue_run: p must be a JSON object' using errcode = '22023';
  end if;
  if jsonb_typeof(p -> 'tool_id') is distinct from 'string' then
    raise exception 'enqueue_run: tool_id is required' using errcode = '22023';
  end if;
  if coalesce(jsonb_typeof(p -> 'params'), 'object') <> 'object' then
    raise exception 'enqueue_run: params must be a JSON object' using errcode = '22023';
  end if;
  if v_keep not between 60 and 30 * 86400 then
    raise exception 'enqueue_run: keep_s must be between 60 and 2592000 seconds' using errcode = '22023';
  end if;
  if (p ->> 'context') !~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' then
    raise exception 'enqueue_run: context must be an execution context''s id (a uuid)' using errcode = '22023';
  end if;
  if (p ->> 'approval_id') !~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' then
    raise exception 'enqueue_run: approval_id must be an approval''s id (a uuid)' using errcode = '22023';
  end if;
  if p ? 'progress_token' and jsonb_typeof(p -> 'progress_token') not in ('string', 'number', 'null') then
    raise exception 'enqueue_run: progress_token must be a string or a number' using errcode = '22023';
  end if;
  if (p ->> 'traceparent') !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' then
    raise exception 'enqueue_run: traceparent must be a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>)'
      using errcode = '22023';
  end if;
  insert into public.queued_runs (tool_id, version, caller, caller_role, session_id, max_attempts, schedule_id,
                                  scheduled_for, keep_until, context_id, approval_id, progress_token, traceparent)
  values (kiwi_internal.normalize_ref(p ->> 'tool_id'), p ->> 'version',
          coalesce(p_claims ->> 'sub', 'role:' || coalesce(p_claims ->> 'role', 'service_role')),
          coalesce(p_claims ->> 'role', 'service_role'), p ->> 'session_id',
          coalesce((p ->> 'max_attempts')::int, 1), (p ->> 'schedule_id')::uuid, (p ->> 'scheduled_for')::timestamptz,
          clock_timestamp() + make_interval(secs => v_keep), (p ->> 'context')::uuid, (p ->> 'approval_id')::uuid,
          nullif(p -> 'progress_token', 'null'::jsonb), p ->> 'traceparent')
  returning * into v_row;
  insert into kiwi_internal.queued_run_inputs (run_id, params, claims)
  values (v_row.id, coalesce(p -> 'params', '{}'::jsonb), p_claims);
  update public.queued_runs r
     set msg_id = (select pgmq.send('kiwi_runs', jsonb_build_object('run_id', v_row.id)))
   where r.id = v_row.id
  returning * into v_row;
  perform pg_notify('kiwi_runs', v_row.id::text);
  return v_row;
end
$$;
revoke execute on function kiwi_internal.enqueue_run(jsonb, jsonb) from public;

-- The claims of the request, as the worker will act with them later.
create function kiwi_internal.request_claims() returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_claims jsonb := nullif(current_setting('request.jwt.claims', true), '')::jsonb;
  v_role   text := kiwi_internal.caller_role();
begin
  if v_role in ('anon', 'authenticated', 'service_role') then
    return coalesce(v_claims, '{}'::jsonb) || jsonb_build_object('role', v_role);
  end if;
  return jsonb_build_object('role', 'service_role');  -- the runner's or the dashboard's own connection: an admin
end
$$;
revoke execute on function kiwi_internal.request_claims() from public;

-- One caller keeps at most open_runs_per_caller runs open (queued, running, retrying,
-- waiting for approval; registry_quotas, 520_quotas.sql): 3,000 runs queued by one fresh
-- user in 4 s were all accepted, and every other caller's run waited behind them. Taken
-- under a lock on the caller, so concurrent calls cannot both pass the last free place.
-- Admins are exempt (workers, notifiers, the platform's own runs).
create function kiwi_internal.check_open_runs_quota(p_claims jsonb) returns void
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_caller text := coalesce(p_claims ->> 'sub', 'role:' || coalesce(p_claims ->> 'role', 'service_role'));
  v_limit  bigint := kiwi_internal.quota('open_runs_per_caller');
  v_open   bigint;
begin
  if kiwi_internal.caller_is_admin() or v_limit is null then
    return;
  end if;
  perform pg_advisory_xact_lock(hashtext('kiwi.quota.open_runs'), hashtext(v_caller));
  select count(*) into v_open from public.queued_runs r
   where r.caller = v_caller and r.status in ('queued', 'running', 'retrying', 'waiting_approval');
  if v_open >= v_limit then
    perform kiwi_internal.refuse_quota('open_runs_per_caller',
      format('you have %s runs queued, running or waiting for approval (cancel some with `kiwi cancel`, or wait for them to end)',
             v_open));
  end if;
end
$$;
revoke execute on function kiwi_internal.check_open_runs_quota(jsonb) from public;

create function kiwi_internal.enqueue_run_as_caller(p jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row    public.queued_runs;
  v_claims jsonb := kiwi_internal.request_claims();
begin
  if kiwi_internal.caller_role() = 'anon' then
    raise exception 'anonymous callers cannot queue runs' using errcode = '42501',
      hint = 'sign in (kiwi token, or a Supabase Auth session), or run the tool directly';
  end if;
  -- a tool the caller may read (anything else is "not found", as everywhere)
  if jsonb_typeof(p -> 'tool_id') = 'string' and (kiwi_internal.readable_tool(p ->> 'tool_id')).ref is null then
    raise exception 'tool % not found', p ->> 'tool_id' using errcode = 'PT404',
      hint = 'search for it with `kiwi search`; a private tool is found only by those who may read it';
  end if;
  perform kiwi_internal.check_open_runs_quota(v_claims);
  -- a schedule's tick is the schedules' to queue (enqueue_due_schedules): a caller naming one
  -- could take another's (schedule_id, scheduled_for) slot and so cancel that tick
  v_row := kiwi_internal.enqueue_run(p - array['schedule_id', 'scheduled_for'], v_claims);
  return kiwi_internal.queued_run_json(v_row);
end
$$;
revoke execute on function kiwi_internal.enqueue_run_as_caller(jsonb) from public;
grant execute on function kiwi_internal.enqueue_run_as_caller(jsonb) to authenticated, service_role;

create function public.enqueue_run(p jsonb) returns jsonb
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.enqueue_run_as_caller(p)
$$;
comment on function public.enqueue_run(jsonb) is
  'Queue a run of a tool as yourself: {tool_id, version, params, session_id, max_attempts (1-10), keep_s (how long the result is kept, default a day), context (an execution context the run is checked against), approval_id (an approval it uses), progress_token (an MCP task''s), traceparent (the W3C trace context the worker''s spans continue)}. The row and its queue message are written in one transaction; a worker runs it through the same gate and sandbox as a direct run. Returns the queued run.';
revoke execute on function public.enqueue_run(jsonb) from public;
grant execute on function public.enqueue_run(jsonb) to authenticated, service_role;

-- A queued run as its caller sees it, with the events after p_after_event (none when it is
-- negative: its latest event is in last_event anyway).
create function public.queued_run(p_id uuid, p_after_event bigint default 0) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select kiwi_internal.queued_run_json(r) || jsonb_build_object('events', coalesce((
           select jsonb_agg(jsonb_build_object('id', e.id, 'at', e.at, 'kind', e.kind, 'message', e.message,
                                               'progress', e.progress, 'total', e.total) order by e.id)
             from public.queued_run_events e
            where e.run_id = r.id and e.id > coalesce(p_after_event, 0) and coalesce(p_after_event, 0) >= 0), '[]'::jsonb))
    from public.queued_runs r
   where r.id = p_id
$$;
comment on function public.queued_run(uuid, bigint) is
  'A queued run you may read (null otherwise), with what it reported after event p_after_event (nothing when it is negative; the latest is last_event).';
revoke execute on function public.queued_run(uuid, bigint) from public;
grant execute on function public.queued_run(uuid, bigint) to authenticated, service_role;

-- Cancel from anywhere: a run not started ends at once; a running one is asked to stop, and
-- the worker holding it (told through pg_notify) kills its process tree and finishes it. A
-- run waiting for approval takes its pending approval with it (denied, saying why), in the
-- same transaction: it no longer waits in `kiwi approvals` for a decision nobody needs.
create function kiwi_internal.cancel_queued_run(p_id uuid) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.queued_runs;
  v_was text;
begin
  select * into v_row from public.queued_runs r where r.id = p_id for update;
  if not found or not (kiwi_internal.caller_is_admin() or v_row.caller = kiwi_internal.caller_identity()) then
    raise exception 'queued run % not found', p_id using errcode = 'PT404', hint = 'list your runs with `kiwi runs`';
  end if;
  v_was := v_row.status;
  if v_row.status in ('queued', 'retrying', 'waiting_approval') then
    if v_row.msg_id is not null then
      perform pgmq.delete('kiwi_runs', v_row.msg_id);
    end if;
    update public.queued_runs r
       set status = 'cancelled', finished_at = clock_timestamp(), cancel_requested_at = clock_timestamp(),
           error = 'cancelled before it ran', msg_id = null
     where r.id = p_id returning * into v_row;
    delete from kiwi_internal.queued_run_inputs i where i.run_id = p_id;
    insert into public.queued_run_events (run_id, kind, message) values (p_id, 'status', 'cancelled');
    -- the approval it waited for is closed with it: nobody is left to decide for a run that is gone
    -- (no other open run waits on it; the run above is already cancelled, so approvals_resume ends nothing)
    if v_was = 'waiting_approval' and v_row.approval_id is not null and not exists (
         select 1 from public.queued_runs q
          where q.approval_id = v_row.approval_id and q.id <> p_id
            and q.status in ('queued', 'running', 'retrying', 'waiting_approval')) then
      update public.approvals a
         set status = 'denied', decided_by = kiwi_internal.caller_identity(), decided_at = clock_timestamp(),
             reason = format('the queued run %s waiting for it was cancelled', p_id)
       where a.id = v_row.approval_id and a.status = 'pending';
    end if;
  elsif v_row.status = 'running' and v_row.cancel_requested_at is null then
    update public.queued_runs r set cancel_requested_at = clock_timestamp() where r.id = p_id returning * into v_row;
    perform pg_notify('kiwi_run_cancel', p_id::text);
  end if;
  return kiwi_internal.queued_run_json(v_row);
end
$$;
revoke execute on function kiwi_internal.cancel_queued_run(uuid) from public;
grant execute on function kiwi_internal.cancel_queued_run(uuid) to authenticated, service_role;

create function public.cancel_queued_run(p_id uuid) returns jsonb
  language sql volatile
  set search_path = ''
as $$
  select kiwi_internal.cancel_queued_run(p_id)
$$;
comment on function public.cancel_queued_run(uuid) is
  'Cancel a queued run of yours (admins: anyone''s): one not started ends at once; a running one is stopped by the worker holding it, its processes killed. An ended run is returned as it is.';
revoke execute on function public.cancel_queued_run(uuid) from public;
grant execute on function public.cancel_queued_run(uuid) to authenticated, service_role;

create function kiwi_internal.refuse_unless_admin(p_what text) returns void
  language plpgsql stable
  set search_path = ''
as $$
begin
  if not kiwi_internal.caller_is_admin() then
    raise exception '% is for workers only (an admin connection)', p_what using errcode = '42501',
      hint = 'run `kiwi worker`; callers queue runs with enqueue_run';
  end if;
end
$$;
revoke execute on function kiwi_internal.refuse_unless_admin(text) from public;
grant execute on function kiwi_internal.refuse_unless_admin(text) to authenticated, service_role;

-- A worker takes up to p_count runs, each hidden from other workers for p_lease_s seconds
-- (worker_extend keeps it hidden while it runs). A message whose run has ended, or was
-- cancelled meanwhile, is archived and skipped (a run cancelled while a worker that died held
-- it ends cancelled, never to run again); a run taken more than max_deliveries times (its
-- workers died) is dead-lettered. Returns the runs to start, with their inputs.
--
-- Fair across callers: pgmq reads the oldest message first, so one caller's backlog (up to
-- open_runs_per_caller) would make every other caller wait behind it. A queued run whose
-- caller already runs more than another caller with runs waiting goes to the back of the
-- queue (its message archived and sent again) instead of being taken, at most 100 times a
-- call; the other caller's run, behind it, is taken first. (The run sent back is visible
-- again once the call's transaction ends: the call then ends with {"more": true}.)
--
-- Skipped messages do not count against p_count: it reads on until it has p_count runs or the
-- queue shows no more, so a real run behind thousands of orphaned messages is taken in the
-- same call (2,805 of them once drained at two a second, one a poll). After 1,000 skipped
-- messages in one call it stops, to keep its transaction short, and says so with a last row
-- {"skipped": n, "more": true} (no id): the worker then takes again at once.
-- Whether the run of p_caller whose message is p_msg_id should let another caller's go first:
-- p_caller has runs running, and a caller with fewer running has a run queued behind it
-- (a later message). A message sent to the back is behind all of those, so no run goes back
-- twice for the same waiting run (nor forever for a run whose message was lost).
create function kiwi_internal.another_caller_goes_first(p_caller text, p_msg_id bigint) returns boolean
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_running bigint;
begin
  select count(*) into v_running from public.queued_runs r where r.caller = p_caller and r.status = 'running';
  if v_running = 0 then
    return false;
  end if;
  return exists (
    select 1
      from (select distinct r.caller from public.queued_runs r
             where r.status = 'queued' and r.caller <> p_caller and r.msg_id > p_msg_id) w
     where (select count(*) from public.queued_runs x where x.caller = w.caller and x.status = 'running') < v_running);
end
$$;
revoke execute on function kiwi_internal.another_caller_goes_first(text, bigint) from public;

-- The time limit (config.timeout, whole seconds up) of the tool's cached plan, for the version
-- asked (null: the latest); null when no cached plan is that version or it names none.
create function kiwi_internal.cached_timeout_s(p_tool_id text, p_version text) returns int
  language sql stable
  set search_path = ''
as $$
  select ceil(least((p.plan -> 'config' ->> 'timeout')::numeric, kiwi_internal.max_timeout_s()))::int
    from kiwi_internal.plan_cache p
   where p.tool_ref = kiwi_internal.normalize_ref(p_tool_id)
     and (p_version is null or p.version = p_version)
     and jsonb_typeof(p.plan -> 'config' -> 'timeout') = 'number'
$$;
revoke execute on function kiwi_internal.cached_timeout_s(text, text) from public;

create function kiwi_internal.worker_take(p_worker uuid, p_count int, p_lease_s int) returns setof jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_msg     record;
  v_row     public.queued_runs;
  v_in      kiwi_internal.queued_run_inputs;
  v_want    int := least(greatest(p_count, 1), 100);
  v_taken   int := 0;
  v_skipped int := 0;
  v_read    int;
  v_batch   int;
  v_turned  int := 0;
  v_lease   int;
begin
  perform kiwi_internal.refuse_unless_admin('worker_take');
  loop
    v_read := 0;
    -- once orphans show up, read them a hundred at a time; a run read beyond what was asked
    -- for is put back at once (set_vt 0), still first in line
    v_batch := case when v_skipped > 0 then 100 else v_want - v_taken end;
    for v_msg in select * from pgmq.read('kiwi_runs', greatest(p_lease_s, 1), v_batch) loop
      v_read := v_read + 1;
      if v_taken >= v_want then
        perform pgmq.set_vt('kiwi_runs', v_msg.msg_id, 0);
        continue;
      end if;
      select * into v_row from public.queued_runs r
       where r.id = (v_msg.message ->> 'run_id')::uuid for update;
      if not found or v_row.status not in ('queued', 'running', 'retrying') or v_row.msg_id <> v_msg.msg_id then
        perform pgmq.archive('kiwi_runs', v_msg.msg_id);
        v_skipped := v_skipped + 1;
        continue;
      end if;
      if v_row.cancel_requested_at is not null then  -- cancelled while a worker that then died ran it
        perform kiwi_internal.end_queued_run(v_row.id, 'cancelled',
          'cancelled while it ran; its worker stopped before ending it, and it was not run again', null);
        v_skipped := v_skipped + 1;
        continue;
      end if;
      if v_row.attempt >= v_row.max_deliveries + v_row.max_attempts - 1 then
        perform kiwi_internal.end_queued_run(v_row.id, 'dead',
          format('dead-lettered: taken %s times and never finished (its workers stopped)', v_row.attempt), null);
        v_skipped := v_skipped + 1;
        continue;
      end if;
      if v_row.status = 'queued' and v_turned < 100 and kiwi_internal.another_caller_goes_first(v_row.caller, v_msg.msg_id) then
        -- to the back of the queue: the callers running less come first
        perform pgmq.archive('kiwi_runs', v_msg.msg_id);
        update public.queued_runs r set msg_id = (select pgmq.send('kiwi_runs', jsonb_build_object('run_id', r.id)))
         where r.id = v_row.id;
        v_turned := v_turned + 1;
        v_skipped := v_skipped + 1;
        continue;
      end if;
      update public.queued_runs r
         set status = 'running', attempt = r.attempt + 1, worker_id = p_worker,
             started_at = coalesce(r.started_at, clock_timestamp()), next_attempt_at = null
       where r.id = v_row.id returning * into v_row;
      insert into public.queued_run_events (run_id, kind, message)
      values (v_row.id, 'status', format('running (attempt %s)', v_row.attempt));
      select * into v_in from kiwi_internal.queued_run_inputs i where i.run_id = v_row.id;
      -- hidden for the tool's own time limit too, when its cached plan names one: the worker
      -- then need not extend the lease before the run starts (lease_s says what was granted)
      v_lease := p_lease_s + coalesce(kiwi_internal.cached_timeout_s(v_row.tool_id, v_row.version), 0);
      if v_lease > p_lease_s then
        perform pgmq.set_vt('kiwi_runs', v_msg.msg_id, v_lease);
      end if;
      v_taken := v_taken + 1;
      return next kiwi_internal.queued_run_json(v_row) || jsonb_build_object(
        'params', coalesce(v_in.params, '{}'::jsonb), 'claims', coalesce(v_in.claims, '{}'::jsonb),
        'session_id', v_row.session_id, 'read_ct', v_msg.read_ct, 'lease_s', v_lease);
    end loop;
    exit when v_read < v_batch or v_taken >= v_want or v_skipped >= 1000;  -- fewer than asked for: no more shown
  end loop;
  -- runs sent to the back are visible only once this transaction ends: take again at once
  if v_taken < v_want and (v_skipped >= 1000 or v_turned > 0) then
    return next jsonb_build_object('skipped', v_skipped, 'more', true);
  end if;
end
$$;
revoke execute on function kiwi_internal.worker_take(uuid, int, int) from public;
grant execute on function kiwi_internal.worker_take(uuid, int, int) to service_role;

-- Ends a run: its status, error and result, the message archived, the inputs deleted.
create function kiwi_internal.end_queued_run(p_id uuid, p_status text, p_error text, p_result jsonb) returns void
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_msg bigint;
begin
  select r.msg_id into v_msg from public.queued_runs r where r.id = p_id;
  update public.queued_runs r
     set status = p_status, finished_at = clock_timestamp(), result = p_result,
         error = case when char_length(p_error) > 2000 then left(p_error, 1999) || '…' else p_error end,
         msg_id = null
   where r.id = p_id;
  if v_msg is not null then
    perform pgmq.archive('kiwi_runs', v_msg);
  end if;
  delete from kiwi_internal.queued_run_inputs i where i.run_id = p_id;
  insert into public.queued_run_events (run_id, kind, message) values (p_id, 'status', p_status);
end
$$;
revoke execute on function kiwi_internal.end_queued_run(uuid, text, text, jsonb) from public;

-- The attempt that holds a run, still running: else null (the run moved on without it).
create function kiwi_internal.held_run(p_id uuid, p_attempt int) returns public.queued_runs
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_row public.queued_runs;
begin
  select * into v_row from public.queued_runs r
   where r.id = p_id and r.attempt = p_attempt and r.status = 'running' for update;
  return v_row;
end
$$;
revoke execute on function kiwi_internal.held_run(uuid, int) from public;

-- While it runs, the worker keeps the run hidden (p_lease_s from now) and hears whether it
-- was cancelled. False: the run is no longer this attempt's (stop it).
create function kiwi_internal.worker_extend(p_id uuid, p_attempt int, p_lease_s int) returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.queued_runs;
begin
  perform kiwi_internal.refuse_unless_admin('worker_extend');
  v_row := kiwi_internal.held_run(p_id, p_attempt);
  if v_row.id is null then
    return jsonb_build_object('held', false, 'cancel', true);
  end if;
  perform pgmq.set_vt('kiwi_runs', v_row.msg_id, greatest(p_lease_s, 1));
  return jsonb_build_object('held', true, 'cancel', v_row.cancel_requested_at is not null);
end
$$;
revoke execute on function kiwi_internal.worker_extend(uuid, int, int) from public;
grant execute on function kiwi_internal.worker_extend(uuid, int, int) to service_role;

-- What a running run reported, kept for its poller (at most 500 events a run).
create function kiwi_internal.worker_event(p_id uuid, p_kind text, p_message text, p_progress double precision,
                                           p_total double precision) returns void
  language plpgsql volatile security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.refuse_unless_admin('worker_event');
  if (select count(*) from public.queued_run_events e where e.run_id = p_id) < 500 then
    insert into public.queued_run_events (run_id, kind, message, progress, total)
    values (p_id, p_kind, left(p_message, 2000), p_progress, p_total);
  end if;
end
$$;
revoke execute on function kiwi_internal.worker_event(uuid, text, text, double precision, double precision) from public;
grant execute on function kiwi_internal.worker_event(uuid, text, text, double precision, double precision)
  to service_role;

-- A run ended on a worker: with p_retry (the tool's config.requeue: {attempts, backoff, on}),
-- a failure it names is tried again after backoff * 2^(attempt-1) seconds until the
-- attempts are spent, then dead-lettered. Otherwise the run ends with its status, and its
-- record (p_record, as record_run takes it) is written as the caller who queued it, in this
-- same transaction. The attempt's audit rows (p_audits, as record_audits takes them) are
-- written as that caller too, whatever became of the run, unless the attempt is stale.
-- Returns what became of it: success, error, timeout, cancelled, retrying, dead, or stale
-- (another attempt holds the run: nothing was written).
create function kiwi_internal.worker_finish(p_id uuid, p_attempt int, p_status text, p_result jsonb,
                                            p_record jsonb, p_retry jsonb, p_audits jsonb) returns text
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row     public.queued_runs;
  v_error   text := left(p_result ->> 'error', 2000);
  v_limit   int := least(greatest(coalesce((p_retry ->> 'attempts')::int, 1), 1), 10);
  v_backoff double precision := least(greatest(coalesce((p_retry ->> 'backoff')::double precision, 1), 0), 3600);
  v_final   text := p_status;
begin
  perform kiwi_internal.refuse_unless_admin('worker_finish');
  if p_status not in ('success', 'error', 'timeout', 'cancelled') then
    raise exception 'worker_finish: status must be success, error, timeout or cancelled' using errcode = '22023';
  end if;
  v_row := kiwi_internal.held_run(p_id, p_attempt);
  if v_row.id is null then
    return 'stale';
  end if;
  if p_audits is not null and jsonb_array_length(p_audits) > 0 then
    perform kiwi_internal.write_audits(p_audits, v_row.caller, v_row.caller_role);
  end if;
  if p_status in ('error', 'timeout') and v_row.cancel_requested_at is null
     and coalesce(p_retry -> 'on', '["error", "timeout"]'::jsonb) ? p_status and v_limit > 1 then
    if v_row.attempt < v_limit then
      update public.queued_runs r
         set status = 'retrying', max_attempts = v_limit, error = v_error,
             next_attempt_at = clock_timestamp() + make_interval(secs => v_backoff * 2 ^ (v_row.attempt - 1))
       where r.id = p_id;
      perform pgmq.set_vt('kiwi_runs', v_row.msg_id, ceil(v_backoff * 2 ^ (v_row.attempt - 1))::int);
      insert into public.queued_run_events (run_id, kind, message)
      values (p_id, 'status', format('retrying after attempt %s of %s: %s', v_row.attempt, v_limit, v_error));
      return 'retrying';
    end if;
    v_final := 'dead';
    v_error := format('dead-lettered after %s attempts: %s', v_row.attempt, v_error);
  end if;
  perform kiwi_internal.end_queued_run(p_id, v_final, v_error, p_result);
  -- the record last: counting it locks its tool's row of run counts (655_quality_score.sql),
  -- which every run of that tool ending now waits for; held from here to the commit only
  if p_record is not null and jsonb_typeof(p_record) = 'object' then
    perform kiwi_internal.write_run_records(
      jsonb_build_array(p_record || jsonb_build_object('id', p_id)), v_row.caller, v_row.caller_role);
  end if;
  return v_final;
end
$$;
revoke execute on function kiwi_internal.worker_finish(uuid, int, text, jsonb, jsonb, jsonb, jsonb) from public;
grant execute on function kiwi_internal.worker_finish(uuid, int, text, jsonb, jsonb, jsonb, jsonb) to service_role;

-- The gate asked for approval: the run waits, off the queue, until a person decides
-- (580_approval_resume.sql puts it back, or ends it).
create function kiwi_internal.worker_wait_approval(p_id uuid, p_attempt int, p_approval_id uuid) returns text
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_row public.queued_runs;
begin
  perform kiwi_internal.refuse_unless_admin('worker_wait_approval');
  v_row := kiwi_internal.held_run(p_id, p_attempt);
  if v_row.id is null then
    return 'stale';
  end if;
  perform pgmq.archive('kiwi_runs', v_row.msg_id);
  update public.queued_runs r
     set status = 'waiting_approval', approval_id = p_approval_id, msg_id = null, attempt = r.attempt - 1
   where r.id = p_id;
  insert into public.queued_run_events (run_id, kind, message)
  values (p_id, 'status', format('waiting for approval %s', p_approval_id));
  return 'waiting_approval';
end
$$;
revoke execute on function kiwi_internal.worker_wait_approval(uuid, int, uuid) from public;
grant execute on function kiwi_internal.worker_wait_approval(uuid, int, uuid) to service_role;

-- The worker functions as RPCs: thin wrappers, admin-only like what they call.
create function public.worker_take(p_worker uuid, p_count int default 1, p_lease_s int default 30)
  returns setof jsonb language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_take(p_worker, p_count, p_lease_s) $$;
comment on function public.worker_take(uuid, int, int) is
  'For kiwi worker (admins only): take up to p_count queued runs, hidden from other workers for p_lease_s seconds, and for the tool''s time limit more when its cached plan names one; each with its parameters, the claims to act with and lease_s, the seconds it is hidden for. Messages of ended or missing runs are archived on the way, not counted; after 1,000 of them a last row {skipped, more: true} says to take again at once.';
revoke execute on function public.worker_take(uuid, int, int) from public;
grant execute on function public.worker_take(uuid, int, int) to service_role;

create function public.worker_extend(p_id uuid, p_attempt int, p_lease_s int)
  returns jsonb language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_extend(p_id, p_attempt, p_lease_s) $$;
comment on function public.worker_extend(uuid, int, int) is
  'For kiwi worker (admins only): keep a running run hidden p_lease_s more seconds; says whether it is still this attempt''s and whether it was cancelled.';
revoke execute on function public.worker_extend(uuid, int, int) from public;
grant execute on function public.worker_extend(uuid, int, int) to service_role;

create function public.worker_event(p_id uuid, p_kind text, p_message text, p_progress double precision default null,
                                    p_total double precision default null)
  returns void language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_event(p_id, p_kind, p_message, p_progress, p_total) $$;
comment on function public.worker_event(uuid, text, text, double precision, double precision) is
  'For kiwi worker (admins only): keep what a running run reported (progress, log, status) for its poller.';
revoke execute on function public.worker_event(uuid, text, text, double precision, double precision) from public;
grant execute on function public.worker_event(uuid, text, text, double precision, double precision) to service_role;

create function public.worker_finish(p_id uuid, p_attempt int, p_status text, p_result jsonb, p_record jsonb,
                                     p_retry jsonb default null, p_audits jsonb default null)
  returns text language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_finish(p_id, p_attempt, p_status, p_result, p_record, p_retry, p_audits) $$;
comment on function public.worker_finish(uuid, int, text, jsonb, jsonb, jsonb, jsonb) is
  'For kiwi worker (admins only): end the attempt p_attempt of a run: its result, run record and audit rows (p_audits, a JSON array) in one transaction, or a retry after backoff, or dead-lettered; stale when another attempt holds the run (nothing written).';
revoke execute on function public.worker_finish(uuid, int, text, jsonb, jsonb, jsonb, jsonb) from public;
grant execute on function public.worker_finish(uuid, int, text, jsonb, jsonb, jsonb, jsonb) to service_role;

create function public.worker_wait_approval(p_id uuid, p_attempt int, p_approval_id uuid)
  returns text language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_wait_approval(p_id, p_attempt, p_approval_id) $$;
comment on function public.worker_wait_approval(uuid, int, uuid) is
  'For kiwi worker (admins only): the gate asked for approval p_approval_id; the run waits off the queue until it is decided.';
revoke execute on function public.worker_wait_approval(uuid, int, uuid) from public;
grant execute on function public.worker_wait_approval(uuid, int, uuid) to service_role;

-- A page of the queued runs you may read, newest first; p_status: one status, or 'open'
-- (queued, running, retrying, waiting_approval); p_before: the queued_at to page before.
create function public.queued_runs_page(p_status text default null, p_limit int default 50,
                                        p_before timestamptz default null) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select coalesce(jsonb_agg(kiwi_internal.queued_run_json(r) - 'result' order by r.queued_at desc, r.id), '[]'::jsonb)
    from (select * from public.queued_runs q
           where (p_status is null or q.status = p_status
                  or (p_status = 'open' and q.status in ('queued', 'running', 'retrying', 'waiting_approval')))
             and (p_before is null or q.queued_at < p_before)
           order by q.queued_at desc, q.id
           limit least(greatest(coalesce(p_limit, 50), 1), 1000)) as r
$$;
comment on function public.queued_runs_page(text, int, timestamptz) is
  'Queued runs you may read, newest first, without their results: p_status one status or ''open''; at most p_limit (1-1000); p_before pages by queued_at.';
revoke execute on function public.queued_runs_page(text, int, timestamptz) from public;
grant execute on function public.queued_runs_page(text, int, timestamptz) to authenticated, service_role;
