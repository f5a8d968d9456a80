-- Who may do what: signed-in callers request approvals and read their own; an owner of
-- the tool's namespace (not the requester) or an admin decides; only the requester uses
-- one; nobody writes the tables directly; anon does nothing.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(16);
select tests.make_acme();

insert into approval_policies (pattern, ttl_seconds) values ('acme/*', 600);
create temporary table t (name text primary key, id uuid);
grant all on t to anon, authenticated, service_role;

select tests.act_as_user('member');
insert into t select 'm', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64),
                                                               'session_id', 'member-session')) ->> 'id')::uuid;
select is((select requested_by from approvals where id = (select id from t where name = 'm')), tests.member_id()::text,
  'the database records who asked');
select is(approval_required('acme/public_tool') ->> 'policy', 'acme/*', 'a signed-in user sees which policy applies');
select throws_ok($$select decide_approval((select id from t where name = 'm'), true)$$,
  '42501', null, 'a member who is not an owner cannot approve, not even their own request');
select throws_ok($$update approvals set status = 'approved' where id = (select id from t where name = 'm')$$,
  '42501', null, 'nobody writes approvals directly');
select throws_ok($$insert into approval_policies (pattern) values ('x')$$,
  '42501', null, 'a signed-in user cannot declare an approval policy');

select tests.act_as_user('stranger');
select is((select count(*)::int from approvals), 0, 'a stranger reads no approvals of others');
select throws_ok($$select decide_approval((select id from t where name = 'm'), true)$$,
  'PT404', null, 'a stranger cannot decide, nor learn that it exists');

select tests.act_as_user('owner');
insert into t select 'o', (request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
select throws_ok($$select decide_approval((select id from t where name = 'o'), true)$$,
  '42501', null, 'an owner cannot approve their own request');
select is((select count(*)::int from pending_approvals), 2, 'an owner sees the pending approvals of the namespace');
select throws_like($$select decide_approval((select id from t where name = 'm'), true, null, 'member-session')$$,
  '%session that requested it%', 'a call is never approved from the session that requested it');
select is(decide_approval((select id from t where name = 'm'), true, 'go') ->> 'status', 'approved',
  'an owner of the namespace approves a member''s request');
select throws_ok($$select use_approval((select id from t where name = 'm'), 'acme/public_tool', repeat('a', 64))$$,
  'PT404', null, 'only the requester uses an approval');

select tests.act_as_user('member');
select is(use_approval((select id from t where name = 'm'), 'acme/public_tool', repeat('a', 64)) ->> 'status', 'used',
  'the requester uses it');

select tests.act_as_user('service_role');
select is(decide_approval((select id from t where name = 'o'), false) ->> 'status', 'denied', 'service_role decides any');

select tests.act_as_user('anon');
select throws_ok($$select request_approval(jsonb_build_object('tool_id', 'acme/public_tool', 'params_sha256', repeat('a', 64)))$$,
  '42501', null, 'anon cannot request approvals');
select throws_ok($$select * from approvals$$, '42501', null, 'anon reads no approvals');

select * from finish();
rollback;
