-- Rate limits are data: admins (service_role) declare them; signed-in users read them;
-- anon sees nothing. The counters are private: only take_rate_limit touches them, and
-- it counts a session per caller (one caller cannot use up another's session).
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(14);

select tests.act_as_user('service_role');
select lives_ok($$insert into rate_limits (scope, key, max_calls, per_seconds) values ('session', 'rl_test_shared', 1, 3600)$$,
  'service_role declares a rate limit');
select is(tests.rows_affected($$update rate_limits set max_calls = 1 where key = 'rl_test_shared'$$), 1,
  'service_role changes a rate limit');
select tests.act_as_user('owner');
select is((select max_calls from rate_limits where key = 'rl_test_shared'), 1, 'a signed-in user reads rate limits');
select throws_ok($$insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'rl_test_x', 100, 1)$$,
  '42501', 'permission denied for table rate_limits', 'a signed-in user cannot declare a rate limit');
select throws_ok($$update rate_limits set max_calls = 1000000 where key = 'rl_test_shared'$$,
  '42501', 'permission denied for table rate_limits', 'a signed-in user cannot raise a rate limit');
select throws_ok($$delete from rate_limits where key = 'rl_test_shared'$$,
  '42501', 'permission denied for table rate_limits', 'a signed-in user cannot remove a rate limit');
select throws_ok($$select * from kiwi_internal.rate_limit_counters$$,
  '42501', null, 'a signed-in user cannot read or reset the counters');
select tests.act_as_user('anon');
select throws_ok($$select * from rate_limits$$, '42501', 'permission denied for table rate_limits', 'anon reads no rate limits');
select throws_ok($$insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', 'rl_test_x', 1, 1)$$,
  '42501', 'permission denied for table rate_limits', 'anon cannot declare a rate limit');

-- sessions are counted per caller
select tests.act_as_user('owner');
select is(take_rate_limit('rl_test_tool', null, 'rl_test_shared') ->> 'allowed', 'true', 'the owner''s call in the session is allowed');
select is(take_rate_limit('rl_test_tool', null, 'rl_test_shared') ->> 'allowed', 'false', 'the owner''s second call is refused');
select tests.act_as_user('stranger');
select is(take_rate_limit('rl_test_tool', null, 'rl_test_shared') ->> 'allowed', 'true',
  'a stranger naming the same session id has a session of their own');

select tests.act_as_admin();
select table_privs_are('kiwi_internal', 'rate_limit_counters', 'authenticated', array[]::text[],
  'authenticated holds no privilege on the counters');
select throws_ok($$insert into rate_limits (scope, key, max_calls, per_seconds) values ('user', 'x', 1, 1)$$,
  '23514', null, 'a scope other than tool, server and session is refused');

select * from finish();
rollback;
