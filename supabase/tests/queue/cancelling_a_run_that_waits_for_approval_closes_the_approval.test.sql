-- Cancelling a queued run that waits for approval closes its pending approval in the same
-- transaction (denied, saying the run was cancelled): it is no longer listed for a decision.
-- An approval another open run still waits on is left pending.
begin;
\ir ../_setup.sql
select plan(6);
select tests.make_acme();
insert into approval_policies (pattern, ttl_seconds) values ('acme/public_tool', 3600);

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
select tests.act_as_user('member');
insert into t select 'run', (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid;
insert into t select 'approval', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
select tests.act_as_user('service_role');
select worker_take(gen_random_uuid(), 100, 30);
select worker_wait_approval((select id from t where name = 'run'), 1, (select id from t where name = 'approval'));

select tests.act_as_user('member');
select is((select count(*)::int from pending_approvals where id = (select id from t where name = 'approval')), 1,
  'the approval is pending while the run waits');
select is(cancel_queued_run((select id from t where name = 'run')) ->> 'status', 'cancelled', 'its caller cancels the run');
select is((select status from approvals where id = (select id from t where name = 'approval')), 'denied',
  'the approval is closed with it');
select is((select reason from approvals where id = (select id from t where name = 'approval')),
  format('the queued run %s waiting for it was cancelled', (select id from t where name = 'run')),
  'saying why');
select is((select count(*)::int from pending_approvals where id = (select id from t where name = 'approval')), 0,
  'and is no longer listed for a decision');
select is((select status from queued_runs where id = (select id from t where name = 'run')), 'cancelled',
  'the run stays cancelled (the closing decision ends nothing more)');

select * from finish();
rollback;
