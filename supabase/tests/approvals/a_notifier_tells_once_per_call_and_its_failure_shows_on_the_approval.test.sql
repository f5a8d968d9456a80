-- A policy's notifier is queued once for identical pending calls (same tool, parameters'
-- sha256 and requester) within ten minutes, not once per call; other calls are notified.
-- What became of it is on the approval (notice, also in pending_approvals): queued, not sent
-- and why, sent, or failed with the notifier run's reason.
begin;
\ir ../_setup.sql
select plan(9);
select tests.make_acme();
select tests.publish('notify_hook', 'script', 'bash_runtime');
insert into approval_policies (pattern, ttl_seconds, notifier) values ('acme/public_tool', 3600, 'notify_hook');
delete from pgmq.q_kiwi_runs;

create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;
select tests.act_as_user('member');
insert into t select 'same' || i, (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid
  from generate_series(1, 5) i;
insert into t select 'other', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('b', 64))) ->> 'id')::uuid;
select tests.act_as_user('owner');
insert into t select 'owners', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;

select tests.act_as_admin();
select is((select count(*)::int from queued_runs where tool_id = 'notify_hook'), 3,
  'five identical calls, another call and another requester''s: three notices');
select is((select count(*)::int from approvals where id in (select id from t where name like 'same%') and notice_run_id is not null), 1,
  'one of the five identical calls was notified');
select matches((select notice from approvals where id = (select id from t where name = 'same1')), '^queued: notifier notify_hook \(run ',
  'the first says its notice is queued');
select is((select notice from approvals where id = (select id from t where name = 'same5')),
  format('not sent: the same call is waiting in approval %s, whose notice went out at %s',
         (select id from t where name = 'same1'), (select requested_at from approvals where id = (select id from t where name = 'same1'))),
  'the others say which approval was notified');

-- the notifier's runs end: one fails (its parameters did not fit), one succeeds
select tests.act_as_user('service_role');
create temporary table took as select * from worker_take(gen_random_uuid(), 10, 30) w;
select worker_finish(((w ->> 'id')::uuid), 1, 'error',
                     '{"status": "error", "error": "unexpected parameter event"}', null)
  from took w where w -> 'params' -> 'approval' ->> 'id' = (select id::text from t where name = 'same1');
select worker_finish(((w ->> 'id')::uuid), 1, 'success', '{"status": "success"}', null)
  from took w where w -> 'params' -> 'approval' ->> 'id' = (select id::text from t where name = 'other');

select tests.act_as_user('member');
select matches((select notice from approvals where id = (select id from t where name = 'same1')),
  '^failed: notifier notify_hook \(run [0-9a-f-]+\) ended error: unexpected parameter event$',
  'a notifier that failed says so on the approval, with its reason');
select matches((select notice from pending_approvals where id = (select id from t where name = 'same1')), '^failed: ',
  'where the pending approvals are listed');
select matches((select notice from approvals where id = (select id from t where name = 'other')), '^sent: notifier notify_hook',
  'one that ran says it was sent');
select is((select status from approvals where id = (select id from t where name = 'same1')), 'pending',
  'the approval itself is still pending');

select tests.act_as_admin();
update approval_policies set notifier = null;
select tests.act_as_user('member');
insert into t select 'quiet', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('c', 64))) ->> 'id')::uuid;
select is((select notice from approvals where id = (select id from t where name = 'quiet')), null,
  'no notifier, no notice');

select * from finish();
rollback;
