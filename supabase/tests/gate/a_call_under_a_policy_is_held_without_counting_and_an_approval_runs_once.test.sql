-- Approvals through the gate. A call a policy covers is held: a pending approval is
-- recorded (as request_approval records it) and nothing is taken from the rate limits,
-- since nothing ran. The approved call, made again with its approval_id, is allowed once
-- and counted then; a second use is refused, saying why. A dry run never needs approval,
-- and takes nothing from the limits: it runs nothing.
-- A call refused by a rate limit records no approval. Anonymous callers never get one.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
-- counted from empty: other tests share the database (this transaction is rolled back)
delete from public.approvals;
delete from kiwi_internal.rate_limit_counters;
select plan(22);
select tests.make_acme();

insert into approval_policies (pattern, ttl_seconds) values ('acme/*', 600);
insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'acme/public_tool', 1, 3600);
create function tests.call(p jsonb) returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64),
                                              'session_id', 'gate-session', 'version', '1.0.0') || p)
$$;
create function tests.calls_counted() returns int language sql security definer as $$
  select coalesce(sum(c.calls), 0)::int from kiwi_internal.rate_limit_counters c
    join public.rate_limits l on l.id = c.limit_id where l.key = 'acme/public_tool'
$$;
grant execute on function tests.call(jsonb), tests.calls_counted() to anon, authenticated, service_role;
create temporary table held (answer jsonb);
grant all on held to anon, authenticated, service_role;

-- held: a pending approval, nothing counted
select tests.act_as_user('member');
insert into held select tests.call('{}');
select is((select answer ->> 'kind' from held), 'approval_pending', 'a call under a policy is held for approval');
select is((select answer ->> 'allowed' from held), 'false', 'and not allowed');
select is((select answer ->> 'reason' from held),
  format('pending approval %s (policy acme/*)', (select answer #>> '{approval,id}' from held)),
  'the reason names the pending approval and the policy');
select is((select answer ->> 'policy' from held), 'acme/*', 'the answer names the policy');
select results_eq($$select status, namespace, tool_id, requested_by, session_id, version
                     from approvals where id = (select (answer #>> '{approval,id}')::uuid from held)$$,
  $$values ('pending', 'acme', 'acme/public_tool', tests.member_id()::text, 'gate-session', '1.0.0')$$,
  'the pending approval is recorded, in the tool''s namespace, as the member''s');
select is(tests.calls_counted(), 0, 'a held call takes nothing from the rate limits');

-- a dry run never needs approval
select is(tests.call('{"dry_run": true}') ->> 'allowed', 'true', 'a dry run is allowed without approval');
select is((select count(*)::int from approvals), 1, 'and records no approval');
select is(tests.calls_counted(), 0, 'and takes nothing from the limits: nothing ran');

-- the approved call runs once
select tests.act_as_user('owner');
select is(decide_approval((select (answer #>> '{approval,id}')::uuid from held), true) ->> 'status', 'approved',
  'an owner of acme approves it');
select tests.act_as_user('member');
create temporary table used on commit drop as
  select tests.call(jsonb_build_object('approval_id', (select answer #>> '{approval,id}' from held))) as answer;
select is((select answer ->> 'allowed' from used), 'true', 'the call with its approval is allowed');
select is((select answer #>> '{approval,status}' from used), 'used', 'the answer carries the approval, now used');
select is(tests.calls_counted(), 1, 'the allowed call is counted');
select is((select answer ->> 'kind' from (select tests.call(jsonb_build_object(
             'approval_id', (select answer #>> '{approval,id}' from held))) as answer) x), 'rate_limited',
  'the limit of 1 is now full: another call is refused before its approval is looked at');
select is((select status from approvals where id = (select (answer #>> '{approval,id}')::uuid from held)), 'used',
  'a refused call uses nothing');

select tests.act_as_admin();
update rate_limits set max_calls = 100 where key = 'acme/public_tool';
select tests.act_as_user('member');
create temporary table again on commit drop as
  select tests.call(jsonb_build_object('approval_id', (select answer #>> '{approval,id}' from held))) as answer;
select is((select answer ->> 'kind' from again), 'approval_refused', 'a second use of the approval is refused');
select matches((select answer ->> 'reason' from again), 'cannot be used: it was already used at',
  'saying why, as use_approval does');
select ok((select answer ? 'hint' and answer ->> 'approval_id' = (select answer #>> '{approval,id}' from held) from again),
  'with a hint and the approval''s id');
select is(tests.calls_counted(), 1, 'a refused approval takes nothing from the limits');

-- a rate-limited call records no approval
select tests.act_as_admin();
update rate_limits set max_calls = 1 where key = 'acme/public_tool';
select tests.act_as_user('member');
select is(tests.call('{"params_sha256": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}') ->> 'kind', 'rate_limited',
  'a call over its limit is refused as rate limited');
select is((select count(*)::int from approvals), 1, 'and records no approval');

-- anonymous callers never get an approval
select tests.act_as_user('anon');
select is(tests.call('{"tool_id": "acme/unlisted_tool"}') ->> 'kind', 'approval_refused',
  'anon''s call under a policy is refused: it cannot request approvals (sign in)');

select * from finish();
rollback;
