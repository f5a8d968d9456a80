-- queue_tick runs every second in every worker: its purges of ended runs and of archived
-- messages must find what they delete through their indexes, not read the whole tables
-- (which hold a week of messages: a full read each second grows with the traffic).
begin;
\ir ../_setup.sql
select plan(6);

-- a week and more of traffic: 20,000 archived messages, a few of them older than a week
select tests.act_as_admin();
insert into pgmq.a_kiwi_runs (msg_id, read_ct, enqueued_at, archived_at, vt, message)
select 900000000 + g, 1, now() - interval '8 days', now() - case when g <= 5 then interval '8 days' else interval '1 day' end,
       now(), jsonb_build_object('run_id', gen_random_uuid())
  from generate_series(1, 20000) as g;
-- and a day's ended runs, kept until tomorrow, a few of them past their keep_until
insert into public.queued_runs (tool_id, status, caller, caller_role, finished_at, keep_until)
select 'hello_world', 'success', 'housekeeping-test', 'authenticated', now() - interval '1 hour',
       now() + case when g <= 5 then interval '-1 minute' else interval '1 day' end
  from generate_series(1, 20000) as g;
analyze pgmq.a_kiwi_runs;
analyze public.queued_runs;

select is((select seq_scan + coalesce((select seq_scan from pg_stat_xact_user_tables where schemaname = 'public' and relname = 'queued_runs'), 0)
             from pg_stat_xact_user_tables where schemaname = 'pgmq' and relname = 'a_kiwi_runs'),
  0::bigint, 'nothing has read either table whole before the tick');

select tests.act_as_user('service_role');
-- another worker's tick may hold the lock for a moment: the tick is asked until it runs
create temp table tick_answer on commit drop as select null::jsonb as answer;
do $$
begin
  for i in 1..50 loop
    update tick_answer set answer = public.queue_tick();
    exit when (select answer ->> 'skipped' from tick_answer) = 'false';
    perform pg_sleep(0.05);
  end loop;
end
$$;
select is((select answer ->> 'skipped' from tick_answer), 'false', 'the tick ran');
select tests.act_as_admin();

select is((select count(*)::int from pgmq.a_kiwi_runs where msg_id between 900000001 and 900000005), 0,
  'the messages archived more than a week ago are purged');
select is((select seq_scan from pg_stat_xact_user_tables where schemaname = 'pgmq' and relname = 'a_kiwi_runs'),
  0::bigint, 'the purge of old messages read the archive through its index, not whole');
select is((select seq_scan from pg_stat_xact_user_tables where schemaname = 'public' and relname = 'queued_runs'),
  0::bigint, 'the purge of ended runs read the queued runs through an index, not whole');

-- (counted after: this count reads the whole table, as it should)
select is((select count(*)::int from queued_runs where caller = 'housekeeping-test'), 19995,
  'the ended runs past their keep_until are purged, the others kept');
select * from finish();
rollback;
