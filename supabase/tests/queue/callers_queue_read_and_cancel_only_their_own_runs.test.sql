-- A run is queued as its caller (who comes from the JWT, never from the request), read and
-- cancelled by that caller (admins: anyone's), and never seen by others. Its parameters and
-- claims stay in a table no API role reads.
begin;
\ir ../_setup.sql
select plan(14);
select tests.make_acme();

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;

select tests.act_as_user('owner');
insert into t select 'mine', (enqueue_run('{"tool_id": "acme/private_tool", "params": {"x": 1}}') ->> 'id')::uuid;
select is((select caller from queued_runs where id = (select id from t where name = 'mine')), tests.owner_id()::text,
  'the database records who queued the run, from the JWT');
select is((select status from queued_runs where id = (select id from t where name = 'mine')), 'queued',
  'a run starts queued');
select is((queued_run((select id from t where name = 'mine')) ->> 'tool_id'), 'acme/private_tool',
  'its caller reads the queued run');
select throws_ok($$select * from kiwi_internal.queued_run_inputs$$, '42501', null,
  'no API role reads the parameters and claims of queued runs');

select tests.act_as_user('stranger');
select is(queued_run((select id from t where name = 'mine')), null, 'another user cannot read it');
select is((select count(*)::int from queued_runs), 0, 'another user sees no queued run of others');
select throws_ok($$select cancel_queued_run((select id from t where name = 'mine'))$$, 'PT404', null,
  'another user cannot cancel it: it is not found');
select throws_ok($$select enqueue_run('{"tool_id": "acme/private_tool"}')$$, 'PT404', null,
  'a tool the caller cannot read cannot be queued (not found)');
select throws_ok($$select enqueue_run('{"tool_id": "acme/public_tool", "params": [1]}')$$, '22023', null,
  'parameters must be an object');

select tests.act_as_user('anon');
select throws_ok($$select enqueue_run('{"tool_id": "acme/public_tool"}')$$, '42501', null,
  'anonymous callers cannot queue runs');

select tests.act_as_user('owner');
select is((cancel_queued_run((select id from t where name = 'mine')) ->> 'status'), 'cancelled',
  'its caller cancels a queued run: it ends at once');
select tests.act_as_admin();
select is((select count(*)::int from kiwi_internal.queued_run_inputs where run_id = (select id from t where name = 'mine')), 0,
  'a cancelled run''s parameters and claims are deleted');
select is((select count(*)::int from pgmq.q_kiwi_runs where message ->> 'run_id' = (select id from t where name = 'mine')::text), 0,
  'a cancelled run leaves no message on the queue');
select tests.act_as_user('owner');
select is((cancel_queued_run((select id from t where name = 'mine')) ->> 'status'), 'cancelled',
  'cancelling an ended run again returns it as it is');

select * from finish();
rollback;
