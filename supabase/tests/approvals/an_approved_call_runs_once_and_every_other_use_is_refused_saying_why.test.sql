-- A call under an approval policy is recorded as pending (parameters as sha256 only);
-- once approved it may be used once, by the caller who asked, for the same tool and
-- parameters. Pending, denied, used, other parameters, another tool, another version:
-- refused, each saying why.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(18);

select tests.publish('appr_test_deploy', 'script', 'bash_runtime');   -- approvals are for tools that exist
select tests.publish('appr_test_x', 'script', 'bash_runtime');
insert into approval_policies (pattern, ttl_seconds) values ('public/appr_test_*', 600), ('appr_test_deploy', 60);
create temporary table t (name text primary key, id uuid);
grant all on t to authenticated, service_role;

select is(approval_required('appr_test_anything') ->> 'required', 'true', 'a glob pattern covers the tools it matches');
select is(approval_required('appr_test_deploy') ->> 'ttl_seconds', '60', 'of several matching policies the shortest ttl applies');
select is(approval_required('appr_testXdeploy') ->> 'required', 'false', '_ in a pattern is a literal, not a wildcard');
select is(approval_required('github.create_issue') ->> 'required', 'false', 'a tool no policy names needs no approval');

insert into t select 'a', (request_approval(jsonb_build_object(
  'tool_id', 'appr_test_deploy', 'params_sha256', repeat('a', 64), 'params_size', 12,
  'content_hash', repeat('c', 64), 'version', '1.0.0', 'session_id', 'appr-session')) ->> 'id')::uuid;
select is((select status from approvals where id = (select id from t where name = 'a')), 'pending', 'the request is pending');
select ok((select expires_at - requested_at = interval '60 seconds' from approvals where id = (select id from t where name = 'a')),
  'it expires after its policy''s ttl');
select is((select count(*)::int from pending_approvals where id = (select id from t where name = 'a')), 1,
  'the dashboard lists it as pending');

select throws_like($$select use_approval((select id from t where name = 'a'), 'appr_test_deploy', repeat('a', 64))$$,
  '%still pending%', 'a pending approval cannot be used');
select lives_ok($$select decide_approval((select id from t where name = 'a'), true, 'ok')$$, 'an admin approves it');
select throws_like($$select use_approval((select id from t where name = 'a'), 'appr_test_deploy', repeat('b', 64))$$,
  '%different parameters%', 'different parameters are refused');
select throws_like($$select use_approval((select id from t where name = 'a'), 'appr_test_other', repeat('a', 64))$$,
  '%is for appr_test_deploy, not appr_test_other%', 'another tool is refused');
select throws_like($$select use_approval((select id from t where name = 'a'), 'appr_test_deploy', repeat('a', 64), repeat('d', 64))$$,
  '%tool changed%', 'another version of the tool is refused');
select is(use_approval((select id from t where name = 'a'), 'appr_test_deploy', repeat('a', 64), repeat('c', 64)) ->> 'status',
  'used', 'an approved call runs once: the first use marks it used');
select throws_like($$select use_approval((select id from t where name = 'a'), 'appr_test_deploy', repeat('a', 64))$$,
  '%already used%', 'an approved call runs once: a second use is refused');

insert into t select 'd', (request_approval(jsonb_build_object('tool_id', 'appr_test_x', 'params_sha256', repeat('a', 64))) ->> 'id')::uuid;
select is(decide_approval((select id from t where name = 'd'), false, 'too risky') ->> 'status', 'denied', 'an admin denies one');
select throws_like($$select use_approval((select id from t where name = 'd'), 'appr_test_x', repeat('a', 64))$$,
  '%denied: too risky%', 'a denied call is refused, with the reason');

select throws_ok($$select request_approval('{"tool_id": "appr_test_x", "params_sha256": "x", "parameters": {"a": 1}}')$$,
  '22023', null, 'a bad request is refused');
select alike(tests.error_of($$select request_approval('{"tool_id": "appr_test_x", "params_sha256": "x", "parameters": {"a": 1}}')$$),
  '%parameters: unknown field%params_sha256: required%', 'naming each field, and parameter values are never taken');

select * from finish();
rollback;
