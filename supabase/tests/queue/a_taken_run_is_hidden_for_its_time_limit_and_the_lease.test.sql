-- worker_take hides a run for the lease the worker asks for and the tool's own time limit
-- (config.timeout of its cached plan), and says how long (lease_s): a worker need not extend
-- the lease before the run starts. A version with no cached plan gets the lease alone.
begin;
\ir ../_setup.sql
select plan(5);

select tests.publish('timed_in_queue', 'script', 'bash_runtime', '1.0.0', '{"timeout": 42.5}');
select tests.publish('timed_in_queue', 'script', 'bash_runtime', '1.1.0', '{"timeout": 42.5}');
set constraints all immediate;  -- the plan cache is built now, as at the publish's commit
delete from pgmq.q_kiwi_runs;  -- only this test's runs (in this transaction)

select tests.act_as_user('owner');
create temp table q on commit drop as
select (enqueue_run('{"tool_id": "timed_in_queue"}') ->> 'id')::uuid as latest,
       (enqueue_run('{"tool_id": "timed_in_queue", "version": "1.0.0"}') ->> 'id')::uuid as pinned;
grant select on q to service_role, postgres;

select tests.act_as_user('service_role');
create temp table taken on commit drop as select worker_take(gen_random_uuid(), 5, 30) as r;
grant select on taken to postgres;
select is((select count(*)::int from taken), 2, 'a worker takes both runs');
select is((select (r ->> 'lease_s')::int from taken where (r ->> 'id')::uuid = (select latest from q)), 73,
  'the latest version is hidden for the lease and its time limit, whole seconds up (30 + 43)');
select is((select (r ->> 'lease_s')::int from taken where (r ->> 'id')::uuid = (select pinned from q)), 30,
  'a version without a cached plan is hidden for the lease alone');

select tests.act_as_admin();
select ok((select m.vt between clock_timestamp() + interval '72 seconds' and clock_timestamp() + interval '74 seconds'
             from pgmq.q_kiwi_runs m join queued_runs r on r.msg_id = m.msg_id where r.id = (select latest from q)),
  'its message is hidden that long');
select ok((select m.vt between clock_timestamp() + interval '29 seconds' and clock_timestamp() + interval '31 seconds'
             from pgmq.q_kiwi_runs m join queued_runs r on r.msg_id = m.msg_id where r.id = (select pinned from q)),
  'the pinned run''s message for the lease');

select * from finish();
rollback;
