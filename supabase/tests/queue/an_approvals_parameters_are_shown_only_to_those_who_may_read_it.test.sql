-- The person deciding an approval sees the parameters of the call waiting on it, as the
-- database can vouch for them: a queued run's own inputs, or a direct call's as its requester
-- attached them, kept only when they hash to the approval's digest. A stranger sees nothing,
-- whatever ids they name, and attaches nothing.
begin;
\ir ../_setup.sql
select plan(10);
select tests.make_acme();
insert into approval_policies (pattern, ttl_seconds) values ('acme/public_tool', 3600);
delete from pgmq.q_kiwi_runs;

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
select tests.act_as_user('member');
insert into t select 'run', (enqueue_run('{"tool_id": "acme/public_tool", "params": {"target": "prod"}}') ->> 'id')::uuid;
insert into t select 'queued', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
insert into t select 'direct', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256',
  encode(sha256(convert_to('{"target":"prod"}', 'UTF8')), 'hex'))) ->> 'id')::uuid;
select tests.act_as_user('service_role');
select worker_take(gen_random_uuid(), 10, 30);
select worker_wait_approval((select id from t where name = 'run'), 1, (select id from t where name = 'queued'));

select tests.act_as_user('owner');
select is((select params from approval_parameters(array[(select id::text from t where name = 'queued')])),
  '{"target": "prod"}'::jsonb, 'an owner of the tool''s namespace sees the waiting run''s parameters');
select is((select count(*)::int from approval_parameters(array[(select id::text from t where name = 'direct')])), 0,
  'a direct call''s approval has no parameters until its requester attaches them');
select is(attach_approval_parameters((select id from t where name = 'direct'), '{"target": "prod"}'), false,
  'only the requester attaches them');
select tests.act_as_user('member');
select is(attach_approval_parameters((select id from t where name = 'direct'), '{"target": "staging"}'), false,
  'parameters that do not hash to the approval''s digest are refused: one call shown, another run');
select is(attach_approval_parameters((select id from t where name = 'direct'), '{"target": "prod"}'), true,
  'the parameters the approval is bound to are kept');
select tests.act_as_user('owner');
select is((select params from approval_parameters(array[(select id::text from t where name = 'direct')])),
  '{"target": "prod"}'::jsonb, 'and shown to whoever decides');
select tests.act_as_user('stranger');
select is(attach_approval_parameters((select id from t where name = 'queued'), '{}'), false,
  'a stranger attaches nothing to another''s approval');
select tests.act_as_user('member');
select is((select params from approval_parameters(array[(select id::text from t where name = 'queued')])),
  '{"target": "prod"}'::jsonb, 'so does the requester');
select tests.act_as_user('stranger');
select is((select count(*)::int from approval_parameters(array(select id::text from t))), 0,
  'a stranger sees nothing, naming every id');
select tests.act_as_user('anon');
select throws_ok($$select * from approval_parameters(array['x'])$$, '42501', null, 'anon may not ask');

select * from finish();
rollback;
