-- One caller keeps at most open_runs_per_caller runs open (queued, running, retrying,
-- waiting for approval): the next is refused (PT422) naming the quota, its value and the row
-- that sets it. Runs that ended free their places; other callers and admins are not held by
-- it; a deleted row lifts it.
begin;
\ir ../_setup.sql
select plan(7);
select tests.make_acme();
update registry_quotas set value = 3 where name = 'open_runs_per_caller';

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;

select tests.act_as_user('member');
insert into t select 'r' || i, (enqueue_run('{"tool_id": "acme/public_tool"}') ->> 'id')::uuid from generate_series(1, 3) i;
select throws_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, 'PT422',
  'quota ''open runs per caller'' (3) reached: you have 3 runs queued, running or waiting for approval (cancel some with `kiwi cancel`, or wait for them to end) (registry_quotas.open_runs_per_caller)',
  'the fourth open run of one caller is refused, naming the quota');
select lives_ok($$select cancel_queued_run((select id from t where name = 'r1'))$$, 'a run is cancelled');
select lives_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, 'a run that ended frees its place');
select throws_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, 'PT422', null, 'and only that one');

select tests.act_as_user('owner');
select lives_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, 'another caller is not held by it');
select tests.act_as_user('service_role');
select lives_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}') from generate_series(1, 5)$$,
  'admins are exempt');

select tests.act_as_admin();
delete from registry_quotas where name = 'open_runs_per_caller';
select tests.act_as_user('member');
select lives_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, 'a deleted row lifts the quota');

select * from finish();
rollback;
