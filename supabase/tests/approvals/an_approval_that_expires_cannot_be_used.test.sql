-- Every approval expires (the policy's ttl_seconds): past expires_at, a pending one can
-- no longer be decided and an approved one no longer used. Expiry is computed on read.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(7);

select tests.publish('appr_exp_tool', 'script', 'bash_runtime');   -- approvals are for tools that exist
insert into approval_policies (pattern, ttl_seconds) values ('appr_exp_tool', 3600);
create temporary table t (name text primary key, id uuid);
insert into t select 'pending', (request_approval(jsonb_build_object('tool_id', 'appr_exp_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
insert into t select 'approved', (request_approval(jsonb_build_object('tool_id', 'appr_exp_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
select decide_approval((select id from t where name = 'approved'), true);

-- two hours later
update approvals set requested_at = requested_at - interval '2 hours', expires_at = expires_at - interval '2 hours',
                     decided_at = decided_at - interval '2 hours'
 where id in (select id from t);

select throws_like($$select use_approval((select id from t where name = 'approved'), 'appr_exp_tool', repeat('a', 64))$$,
  '%expired at%', 'an approval that expires cannot be used');
select throws_like($$select decide_approval((select id from t where name = 'pending'), true)$$,
  '%is expired, not pending%', 'a pending approval that expired cannot be approved');
select is((select count(*)::int from pending_approvals where id in (select id from t)), 0,
  'expired approvals are not pending');
select is((select status from approvals where id = (select id from t where name = 'approved')), 'approved',
  'the stored status is not rewritten: expiry is computed on read');
select is(kiwi_internal.approval_status('approved', now() - interval '1 second'), 'expired',
  'an approved one past expires_at reads as expired');
select is(kiwi_internal.approval_status('used', now() - interval '1 second'), 'used',
  'a used one stays used');
select throws_ok($$insert into approval_policies (pattern, ttl_seconds) values ('appr_exp_zero', 0)$$,
  '23514', null, 'an approval policy needs a ttl of at least one second');

select * from finish();
rollback;
