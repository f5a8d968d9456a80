-- check_call is the gate of every run, in one round trip. A call that no rate limit and no
-- approval policy covers is allowed, for anyone, and takes nothing; what it is given is
-- checked first, every problem named by its field (22023), as everywhere else.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
-- counted from empty: other tests share the database (this transaction is rolled back)
delete from public.approvals;
delete from kiwi_internal.rate_limit_counters;
select plan(13);
select tests.make_acme();

create function tests.call(p jsonb) returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('params_sha256', repeat('a', 64)) || p)
$$;
grant execute on function tests.call(jsonb) to anon, authenticated, service_role;

delete from rate_limits where scope = 'session';  -- (in this transaction only)
select tests.act_as_user('member');
select is(tests.call('{"tool_id": "hello_world", "session_id": "gate-1"}'),
  '{"allowed": true, "limits": [], "approval": null, "per_session": false}'::jsonb,
  'a signed-in caller''s call that nothing covers is allowed, with no limits and no approval, in any session');
select tests.act_as_admin();
insert into rate_limits (scope, key, max_calls, per_seconds) values ('session', 'gate-2', 5, 60);
select tests.act_as_user('member');
select is(tests.call('{"tool_id": "hello_world", "session_id": "gate-1"}'),
  '{"allowed": true, "limits": [], "approval": null, "per_session": true}'::jsonb,
  'while a limit is scoped to a session, the verdict says it may differ in another session');
select is(tests.call('{"tool_id": "acme/private_tool", "version": "1.0.0", "params_size": 2, "dry_run": false}') ->> 'allowed',
  'true', 'a member''s call of a private tool of the namespace is allowed');
select tests.act_as_user('anon');
select is(tests.call('{"tool_id": "public/hello_world"}') ->> 'allowed', 'true',
  'an anonymous call that nothing covers is allowed too (public/x is x)');
select tests.act_as_user('service_role');
select is(tests.call('{"tool_id": "hello_world", "dry_run": true}') ->> 'allowed', 'true', 'and an admin''s dry run');

select tests.act_as_user('member');
select throws_ok($$select public.check_call('{"tool_id": "hello_world"}')$$, '22023', null,
  'params_sha256 is required');
select alike(tests.error_of($$select public.check_call('{"tool_id": "hello world", "params_sha256": "x", "parameters": {"a": 1},
                                                          "approval_id": "nope", "dry_run": "yes", "server": "a b",
                                                          "params_size": -1, "content_hash": "x", "session_id": ""}')$$),
  'invalid call: parameters: unknown field%tool_id: required%server: %params_sha256: required%content_hash: %'
  || 'session_id: %params_size: %approval_id: must be a uuid%dry_run: must be true or false',
  'every bad field is named, unknown ones (parameter values are never taken) first');
select throws_ok($$select public.check_call('[]')$$, '22023', 'invalid call: call: must be a JSON object',
  'the call must be a JSON object');
select throws_ok($$select tests.call('{"tool_id": "hello_world", "server": "github_mcp"}')$$, '22023',
  'invalid call: server: tool "hello_world" runs on no MCP server, not on "github_mcp"',
  'a server that is not the tool''s own is refused: a call is counted against the server it runs on');

-- nothing of the above took a call, nor recorded anything
select tests.act_as_admin();
select is((select count(*)::int from kiwi_internal.rate_limit_counters), 0, 'no counter was touched');
select is((select count(*)::int from approvals), 0, 'no approval was recorded');

select function_privs_are('kiwi_internal', 'check_call', array['jsonb'], 'anon', array['EXECUTE'],
  'the gate''s worker is executable by anon: it takes identity from the session only');
select function_privs_are('kiwi_internal', 'rate_limit_check', array['text', 'text', 'text', 'text'], 'authenticated',
  array[]::text[], 'the counting part, which is told whose bucket to use, is executable by no API role');

select * from finish();
rollback;
