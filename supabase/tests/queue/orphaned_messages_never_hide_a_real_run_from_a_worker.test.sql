-- Messages whose runs are gone or ended are archived on the way and do not count against
-- what a worker asked for: one take reads past them to the real run behind. Past 1,000 of
-- them in one call it stops with a last row {skipped, more: true}, and the next take goes on.
begin;
\ir ../_setup.sql
select plan(6);
select tests.make_acme();
delete from pgmq.q_kiwi_runs;

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
-- 300 messages of runs that do not exist, then a real run
select pgmq.send('kiwi_runs', jsonb_build_object('run_id', gen_random_uuid())) from generate_series(1, 300);
select tests.act_as_user('member');
insert into t select 'real', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;

select tests.act_as_user('service_role');
create temporary table took as select * from worker_take(gen_random_uuid(), 1, 30) w;
select tests.act_as_admin();
select is((select array_agg(w ->> 'id') from took w), array[(select id from t where name = 'real')::text],
  'one take of one run returns the real run behind 300 orphaned messages');
select is((select count(*)::int from pgmq.q_kiwi_runs where message ->> 'run_id' <> (select id from t where name = 'real')::text),
  0, 'and archived every orphaned message on the way');

-- 2,500 orphans, then another real run
select pgmq.send('kiwi_runs', jsonb_build_object('run_id', gen_random_uuid())) from generate_series(1, 2500);
select tests.act_as_user('member');
insert into t select 'later', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
select tests.act_as_user('service_role');
create temporary table took1 as select * from worker_take(gen_random_uuid(), 1, 30) w;
create temporary table took2 as select * from worker_take(gen_random_uuid(), 1, 30) w;
create temporary table took3 as select * from worker_take(gen_random_uuid(), 1, 30) w;
select tests.act_as_admin();
select is((select array_agg((w ->> 'more', (w ->> 'skipped')::int >= 1000)::text) from took1 w), array['(true,t)'],
  'past 1,000 skipped messages a take stops and says to take again');
select is((select array_agg((w ->> 'more', (w ->> 'skipped')::int >= 1000)::text) from took2 w), array['(true,t)'],
  'the next one goes on');
select is((select array_agg(w ->> 'id') from took3 w), array[(select id from t where name = 'later')::text],
  'and the third reaches the real run');
select is((select count(*)::int from pgmq.q_kiwi_runs where message ->> 'run_id' not in (select id::text from t)), 0,
  'every orphaned message is archived');

select * from finish();
rollback;
