-- Nobody files approval requests into another namespace's queue. A request (through
-- request_approval or the gate, check_call) is for a tool the caller may read, or it is
-- "not found", the same answer whether the tool is private or missing; the approval
-- records the tool's namespace as the tools table has it, never as the string reads; and
-- a tool no policy covers needs no approval, so there is nothing to request.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(12);
select tests.make_acme();

insert into approval_policies (pattern, ttl_seconds) values ('acme/*', 600), ('*_runtime', 600), ('victim/*', 600);
create function tests.request(p_tool text) returns jsonb language sql as $$
  select public.request_approval(jsonb_build_object('tool_id', p_tool, 'params_sha256', repeat('a', 64)))
$$;
create function tests.call(p_tool text) returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('tool_id', p_tool, 'params_sha256', repeat('a', 64)))
$$;
grant execute on function tests.request(text), tests.call(text) to anon, authenticated, service_role;

select tests.act_as_user('stranger');
select throws_ok($$select tests.request('acme/private_tool')$$, 'PT404', 'tool "acme/private_tool" not found',
  'a stranger cannot request an approval of a private tool of acme');
select throws_ok($$select tests.request('acme/no_such_tool')$$, 'PT404', 'tool "acme/no_such_tool" not found',
  'and is told the same of a tool that does not exist: nothing tells them apart');
select throws_ok($$select tests.request('victim/anything')$$, 'PT404', 'tool "victim/anything" not found',
  'a request cannot name a namespace''s queue through a made-up reference');
select throws_ok($$select tests.call('acme/private_tool')$$, 'PT404', 'tool "acme/private_tool" not found',
  'the gate refuses the same way when a policy covers a tool the caller cannot read');
select throws_ok($$select tests.request('hello_world')$$, 'PT409',
  'tool "hello_world" needs no approval: no approval policy covers it, so there is nothing to approve',
  'a tool no policy covers needs no approval: nothing to request');

select is(tests.request('acme/public_tool') ->> 'namespace', 'acme',
  'a stranger may request an approval of a public acme tool, in acme''s queue');
select is((tests.request('public/bash_runtime')) ->> 'namespace', 'public',
  'the namespace is the tool''s (public/bash_runtime is bash_runtime, in public)');
select is((tests.request('public/bash_runtime')) ->> 'tool_id', 'bash_runtime', 'and the tool is named by its reference');

select tests.act_as_user('member');
select is(tests.request('acme/private_tool') ->> 'namespace', 'acme', 'a member requests one for the private tool');
select tests.act_as_user('owner');
select is((select count(*)::int from pending_approvals), 2,
  'acme''s owner sees exactly the requests for acme''s tools (the stranger''s and the member''s)');
select tests.act_as_admin();
select is((select count(*)::int from approvals where namespace not in ('acme', 'public')), 0,
  'no request landed in any other queue');
select function_privs_are('kiwi_internal', 'approval_policy_for', array['text'], 'anon', array[]::text[],
  'anon executes nothing of approvals');

select * from finish();
rollback;
