-- Workers take fairly across callers: while one caller has runs running and a backlog
-- queued, another caller's run queued after that backlog is taken next, not after all of it.
-- The backlog is put back, nothing of it lost, and taken once nobody else waits.
begin;
\ir ../_setup.sql
select plan(6);
select tests.make_acme();
delete from pgmq.q_kiwi_runs;

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
select tests.act_as_user('member');
insert into t select 'flood' || i, (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid from generate_series(1, 50) i;
select tests.act_as_user('service_role');
create temporary table took1 as select * from worker_take(gen_random_uuid(), 1, 30) w;
select tests.act_as_user('owner');
insert into t select 'other', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;

select tests.act_as_user('service_role');
create temporary table took2 as select * from worker_take(gen_random_uuid(), 1, 30) w;
select tests.act_as_admin();
select is((select array_agg(w ->> 'id') from took1 w), array[(select id::text from t where name = 'flood1')],
  'the first take is the oldest run');
select is((select array_agg(w ->> 'id') from took2 w), array[(select id::text from t where name = 'other')],
  'with the flooder running one, the other caller''s run behind 49 of its runs is taken next');
select is((select count(*)::int from queued_runs r
            where r.id in (select id from t where name like 'flood%') and r.status = 'queued'
              and exists (select 1 from pgmq.q_kiwi_runs q where q.msg_id = r.msg_id and q.message ->> 'run_id' = r.id::text)),
  49, 'every run of the backlog is still queued, each with its message');

select tests.act_as_user('service_role');
create temporary table took3 as select * from worker_take(gen_random_uuid(), 100, 30) w;
select tests.act_as_admin();
select is((select count(*)::int from took3), 49, 'with nobody else waiting, the backlog is taken');
select is((select count(*)::int from pgmq.q_kiwi_runs q where q.vt <= clock_timestamp()), 0,
  'and nothing is left visible on the queue');

-- a run queued that no message stands for (lost) never holds the others back for good
select tests.act_as_user('owner');
insert into t select 'ghost', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
select tests.act_as_admin();
delete from pgmq.q_kiwi_runs where message ->> 'run_id' = (select id::text from t where name = 'ghost');
select tests.act_as_user('member');
insert into t select 'after' || i, (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid from generate_series(1, 3) i;
select tests.act_as_user('service_role');
create temporary table took4 as select * from worker_take(gen_random_uuid(), 3, 30) w;
select tests.act_as_admin();
select is((select count(*)::int from took4 w where w ? 'id'), 3,
  'runs queued after a lost message are taken: none is sent back for it');

select * from finish();
rollback;
