-- A queued run the gate held for approval waits off the queue; approved, it goes back on by
-- itself; denied, it ends with the reason. A policy's notifier is queued when a request is
-- filed.
begin;
\ir ../_setup.sql
select plan(7);
select tests.make_acme();
select tests.publish('notify_hook', 'script', 'bash_runtime');
insert into approval_policies (pattern, ttl_seconds, notifier) values ('acme/public_tool', 3600, 'notify_hook');
delete from pgmq.q_kiwi_runs;

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
select tests.act_as_user('member');
insert into t select 'a', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
insert into t select 'b', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
insert into t select 'approval_a', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
insert into t select 'approval_b', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('b', 64))) ->> 'id')::uuid;

select tests.act_as_admin();
select is((select count(*)::int from queued_runs where tool_id = 'notify_hook' and caller = 'role:service_role'), 2,
  'each request queues the policy''s notifier, as an admin');
select is((select params -> 'approval' ->> 'id' from kiwi_internal.queued_run_inputs i join queued_runs r on r.id = i.run_id
            where r.tool_id = 'notify_hook' order by r.queued_at limit 1), (select id from t where name = 'approval_a')::text,
  'the notifier is told which approval is waiting');
select tests.act_as_user('service_role');
select worker_take(gen_random_uuid(), 10, 30);
-- b waits its turn behind the notifiers (their caller runs less: 560_run_queue.sql); taken next
select worker_take(gen_random_uuid(), 10, 30);
select worker_wait_approval((select id from t where name = 'a'), 1, (select id from t where name = 'approval_a'));
select worker_wait_approval((select id from t where name = 'b'), 1, (select id from t where name = 'approval_b'));
select is((select status from queued_runs where id = (select id from t where name = 'a')), 'waiting_approval',
  'a held run waits for approval');
select tests.act_as_admin();
select is((select count(*)::int from pgmq.q_kiwi_runs where message ->> 'run_id' in
            (select id::text from t where name in ('a', 'b'))), 0, 'off the queue');

select tests.act_as_user('owner');
select decide_approval((select id from t where name = 'approval_a'), true, 'fine');
select decide_approval((select id from t where name = 'approval_b'), false, 'not today');
select tests.act_as_admin();
select is((select status from queued_runs where id = (select id from t where name = 'a')), 'queued',
  'approved, the run is queued again by itself');
select is((select count(*)::int from pgmq.q_kiwi_runs where message ->> 'run_id' = (select id from t where name = 'a')::text), 1,
  'with a message a worker will take');
select is((select (status, error) from queued_runs where id = (select id from t where name = 'b')),
          row('error'::text, 'denied by ' || tests.owner_id() || ': not today'), 'denied, it ends with the reason');

select * from finish();
rollback;
