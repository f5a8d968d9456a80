-- take_rate_limit takes one call from every limit that applies (tool, server, session),
-- all or none, and refuses once a limit's window is full, saying which limit and when
-- to retry. Windows are fixed, aligned to multiples of per_seconds. Tool ids start
-- with rl_test_ so that other limits do not apply.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(15);

insert into rate_limits (scope, key, max_calls, per_seconds) values
  ('tool', 'public/rl_test_tool', 2, 3600),
  ('server', 'rl_test_server', 3, 3600),
  ('session', 'rl_test_session_small', 1, 3600),
  ('tool', 'rl_test_blocked', 0, 60);

select is((select key from rate_limits where scope = 'tool' and key like '%rl_test_tool'), 'rl_test_tool',
  'a tool key is stored normalised: public/x is x');
select is(take_rate_limit('rl_test_tool', null, 's1') ->> 'allowed', 'true', 'the first call is allowed');
select is(take_rate_limit('public/rl_test_tool', null, 's1') ->> 'allowed', 'true',
  'the second call (public/x is x) is allowed');
create temporary table third on commit drop as select take_rate_limit('rl_test_tool', null, 's2') as answer;
grant select on third to authenticated;
select is((select answer ->> 'allowed' from third), 'false', 'the third call in the window is refused');
select is((select answer #>> '{limit,scope}' from third) || ' ' || (select answer #>> '{limit,key}' from third),
  'tool rl_test_tool', 'the refusal names the limit that is full');
select ok((select (answer ->> 'retry_after_s')::numeric between 0 and 3600 from third),
  'the refusal says when to retry: within the window');
select ok((select abs((answer ->> 'retry_after_s')::numeric
                   - extract(epoch from (answer #>> '{limit,window_resets_at}')::timestamptz - clock_timestamp())::numeric) < 1
             from third),
  'retry_after_s is the time left until the window resets');
select matches((select answer ->> 'reason' from third), 'rate limit: tool rl_test_tool allows 2 call\(s\) per 3600 s; retry in',
  'the reason reads as a sentence');

-- all or none: a refused call takes nothing from the other limits
select is(take_rate_limit('rl_test_other', 'rl_test_server', 'rl_test_session_small') ->> 'allowed', 'true',
  'a call within the server and session limits is allowed');
select is(take_rate_limit('rl_test_other', 'rl_test_server', 'rl_test_session_small') ->> 'allowed', 'false',
  'a second call in a session limited to one is refused');
select is(take_rate_limit('rl_test_other', 'rl_test_server', 's3') ->> 'allowed', 'true',
  'the refused call took nothing from the server''s limit: the next call of another session is allowed');
select is(take_rate_limit('rl_test_other', 'rl_test_server', 's4') ->> 'allowed', 'true',
  'the third allowed call of the server fills its limit of 3');
select is(take_rate_limit('rl_test_other', 'rl_test_server', 's5') ->> 'allowed', 'false',
  'the fourth call of the server is refused, whatever its session');

select is(take_rate_limit('rl_test_blocked', null, null) ->> 'allowed', 'false', 'max_calls 0 blocks a tool');
select is(jsonb_array_length(take_rate_limit('rl_test_unlimited', null, null) -> 'limits'), 0,
  'a call no limit applies to is allowed, with no limits listed');

select * from finish();
rollback;
