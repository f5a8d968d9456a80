-- Workers (admins) take runs with a lease and finish them; the attempt that holds a run
-- records its result and run record once, in one transaction; a stale attempt (the run was
-- taken again after its lease lapsed) records nothing. Retries follow config.requeue and end
-- dead-lettered.
begin;
\ir ../_setup.sql
select plan(17);
select tests.make_acme();

create temporary table t (name text primary key, id uuid, attempt int);
grant all on t to anon, authenticated, service_role;
-- only this test's runs are on the queue (whatever else waits there is set aside in this transaction)
delete from pgmq.q_kiwi_runs;

select tests.act_as_user('owner');
insert into t select 'run', (enqueue_run('{"tool_id": "acme/public_tool", "params": {"n": 7}}') ->> 'id')::uuid, 0;
select throws_ok($$select worker_take(gen_random_uuid(), 1, 30)$$, '42501', null, 'a user cannot take runs');
select throws_ok($$select worker_finish((select id from t), 1, 'success', '{}', null)$$, '42501', null,
  'a user cannot finish runs');

select tests.act_as_user('service_role');
create temporary table taken as select worker_take(gen_random_uuid(), 5, 30) as r;
select is((select count(*)::int from taken), 1, 'a worker takes the queued run');
select is((select (r -> 'params' ->> 'n')::int from taken), 7, 'with its parameters');
select is((select r -> 'claims' ->> 'sub' from taken), tests.owner_id()::text, 'and the claims of its caller');
select is((select count(*)::int from (select worker_take(gen_random_uuid(), 5, 30)) x), 0,
  'a taken run is hidden from other workers while its lease lasts');

-- the lease lapses: another worker takes it again (attempt 2)
select tests.act_as_admin();
select pgmq.set_vt('kiwi_runs', (select msg_id from queued_runs where id = (select id from t)), 0);
select tests.act_as_user('service_role');
select is((select (worker_take(gen_random_uuid(), 5, 30) ->> 'attempt')::int), 2, 'a lapsed lease lets another worker take it');
select is(worker_finish((select id from t), 1, 'success', '{"output": "late"}',
                        '{"tool_id": "acme/public_tool", "status": "success"}', null,
                        jsonb_build_array(jsonb_build_object('session_id', 'queue-late', 'tool_id', 'acme/public_tool',
                          'decision', 'allowed', 'outcome', 'success', 'run_id', (select id from t)))), 'stale',
  'the first attempt, finishing late, is stale');
select is((select count(*)::int from tool_runs where id = (select id from t)), 0, 'a stale attempt records nothing');
select is((select count(*)::int from audit_log where run_id = (select id from t)), 0, 'not even its audit row');
select throws_ok($$select worker_finish((select id from t), 2, 'success', '{}', null, null, '[{"decision": "maybe"}]')$$,
  '22023', null, 'a bad audit row is refused by name, as record_audits refuses it, and ends nothing');
select is(worker_finish((select id from t), 2, 'success', '{"output": "ok"}',
                        '{"tool_id": "acme/public_tool", "status": "success"}', null,
                        jsonb_build_array(jsonb_build_object('session_id', 'queue-ok', 'tool_id', 'acme/public_tool',
                          'decision', 'allowed', 'outcome', 'success', 'run_id', (select id from t)))), 'success',
  'the holding attempt finishes it');
select is((select (caller, status) from tool_runs where id = (select id from t)),
          row(tests.owner_id()::text, 'success'::text), 'its run record is written once, as the caller who queued it');
select is((select array_agg((caller, caller_role, session_id)::text) from audit_log where run_id = (select id from t)),
          array[row(tests.owner_id()::text, 'authenticated', 'queue-ok')::text],
  'and its audit row, in the same transaction, as that caller');
select tests.act_as_admin();
select is((select count(*)::int from pgmq.q_kiwi_runs), 0, 'its message left the queue');

-- retries: two attempts, then dead-lettered
select tests.act_as_user('owner');
update t set id = (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
select tests.act_as_user('service_role');
select worker_take(gen_random_uuid(), 1, 30);
select is(worker_finish((select id from t), 1, 'error', '{"error": "boom"}', '{"tool_id": "acme/public_tool", "status": "error"}',
                        '{"attempts": 2, "backoff": 0}'), 'retrying', 'a retryable failure is tried again');
select tests.act_as_admin();
select pgmq.set_vt('kiwi_runs', (select msg_id from queued_runs where id = (select id from t)), 0);
select tests.act_as_user('service_role');
select worker_take(gen_random_uuid(), 1, 30);
select is(worker_finish((select id from t), 2, 'error', '{"error": "boom"}', '{"tool_id": "acme/public_tool", "status": "error"}',
                        '{"attempts": 2, "backoff": 0}'), 'dead', 'after the last attempt it is dead-lettered');

select * from finish();
rollback;
