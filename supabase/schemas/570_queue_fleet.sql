-- The fleet: which workers are alive and what each runs, and how deep and old the queue is.
-- Workers announce themselves (worker_beat) every few seconds; one not heard of for a
-- minute is shown as gone. Admins read the fleet; callers see their own runs in
-- queued_runs.

create table public.queue_workers (
  id          uuid primary key,
  host        text not null constraint queue_workers_host_length check (char_length(host) <= 255),
  pid         int not null,
  concurrency int not null constraint queue_workers_concurrency_range check (concurrency between 1 and 256),
  started_at  timestamptz not null default clock_timestamp(),
  beat_at     timestamptz not null default clock_timestamp(),
  stopped_at  timestamptz,
  running     uuid[] not null default '{}'
              constraint queue_workers_running_length check (cardinality(running) <= 256)
);
comment on table public.queue_workers is
  'kiwi worker processes: where each runs, when it was last heard of, and the queued runs it holds. Admins read it.';
alter table public.queue_workers enable row level security;
revoke all on table public.queue_workers from public, anon, authenticated, service_role;
grant select, delete on table public.queue_workers to service_role;
create policy "admins read workers" on public.queue_workers for select to service_role
  using ((select kiwi_internal.caller_is_admin()));
create policy "admins remove workers" on public.queue_workers for delete to service_role
  using ((select kiwi_internal.caller_is_admin()));

-- A worker says it is alive and what it runs; p_stopping: it is shutting down.
create function kiwi_internal.worker_beat(p_worker uuid, p_host text, p_pid int, p_concurrency int,
                                          p_running text[], p_stopping boolean) returns void
  language plpgsql volatile security definer
  set search_path = ''
as $$
begin
  perform kiwi_internal.refuse_unless_admin('worker_beat');
  insert into public.queue_workers as w (id, host, pid, concurrency, running, stopped_at)
  values (p_worker, left(p_host, 255), p_pid, p_concurrency, coalesce(p_running, '{}')::uuid[],
          case when p_stopping then clock_timestamp() end)
  on conflict (id) do update
     set beat_at = clock_timestamp(), running = excluded.running, stopped_at = excluded.stopped_at;
  -- workers gone for a day are forgotten
  delete from public.queue_workers w where w.beat_at < clock_timestamp() - interval '1 day';
end
$$;
revoke execute on function kiwi_internal.worker_beat(uuid, text, int, int, text[], boolean) from public;
grant execute on function kiwi_internal.worker_beat(uuid, text, int, int, text[], boolean) to service_role;

create function public.worker_beat(p_worker uuid, p_host text, p_pid int, p_concurrency int, p_running text[],
                                   p_stopping boolean default false)
  returns void language sql volatile set search_path = ''
as $$ select kiwi_internal.worker_beat(p_worker, p_host, p_pid, p_concurrency, p_running, p_stopping) $$;
comment on function public.worker_beat(uuid, text, int, int, text[], boolean) is
  'For kiwi worker (admins only): the worker is alive and runs these queued runs (p_stopping: it is shutting down).';
revoke execute on function public.worker_beat(uuid, text, int, int, text[], boolean) from public;
grant execute on function public.worker_beat(uuid, text, int, int, text[], boolean) to service_role;

create view public.live_workers with (security_invoker = true) as
select w.id, w.host, w.pid, w.concurrency, w.started_at, w.beat_at, w.running,
       case when w.stopped_at is not null then 'stopped'
            when w.beat_at < clock_timestamp() - interval '1 minute' then 'gone'
            else 'alive' end as state
  from public.queue_workers w
 order by w.started_at;
comment on view public.live_workers is
  'kiwi worker processes, newest last: alive (heard of within a minute), gone, or stopped; and the queued runs each holds.';
grant select on public.live_workers to service_role;

-- Queue depth and age by status, for the dashboard: the runs you may read.
create view public.run_queue_depth with (security_invoker = true) as
select r.status, count(*) as runs,
       min(r.queued_at) as oldest_queued_at,
       extract(epoch from clock_timestamp() - min(r.queued_at))::double precision as oldest_age_s
  from public.queued_runs r
 where r.status in ('queued', 'running', 'retrying', 'waiting_approval')
 group by r.status
 order by r.status;
comment on view public.run_queue_depth is
  'Open queued runs you may read, by status (queued, running, retrying, waiting_approval): how many, and how long the oldest has waited.';
grant select on public.run_queue_depth to authenticated, service_role;

create function public.fleet_workers() returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
begin
  if not kiwi_internal.caller_is_admin() then
    return '[]'::jsonb;  -- the fleet is the operators' business
  end if;
  return (select coalesce(jsonb_agg(to_jsonb(w) order by w.started_at), '[]'::jsonb) from public.live_workers w);
end
$$;
comment on function public.fleet_workers() is 'The workers (admins only: others get an empty list), as live_workers shows them.';
revoke execute on function public.fleet_workers() from public;
grant execute on function public.fleet_workers() to authenticated, service_role;
