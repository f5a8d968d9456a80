-- admit_call is the gate of a call with its execution context in one round trip: the
-- context read (the caller's own, unexpired), what the call needs of it checked, then
-- check_call's decision, then a directive's child context opened. A need the context
-- lacks, or a child wider than its parent, is refused as permission_denied with nothing
-- counted, used or opened; another caller's context is not found.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
delete from kiwi_internal.rate_limit_counters;
select plan(25);

select public.publish_tool_version(
  '{"tool_id": "adm_parent", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["hello_world", "adm_*"], "shell": ["bash"]}}',
  '[{"path": "d.md", "content_text": "# parent\n"}]');
select public.publish_tool_version(
  '{"tool_id": "adm_wide", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["*"]}}',
  '[{"path": "d.md", "content_text": "# wide\n"}]');
select public.publish_tool_version(
  '{"tool_id": "adm_narrow", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["hello_world"]}}',
  '[{"path": "d.md", "content_text": "# narrow\n"}]');
select public.publish_tool_version(
  '{"tool_id": "adm_policed", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["hello_world"]}}',
  '[{"path": "d.md", "content_text": "# policed\n"}]');
insert into rate_limits (scope, key, max_calls, per_seconds)
values ('tool', 'adm_wide', 10, 3600), ('tool', 'format_bytes', 10, 3600);
insert into approval_policies (pattern, ttl_seconds) values ('adm_policed', 600);

create function tests.admit(p jsonb) returns jsonb language sql as $$
  select public.admit_call(jsonb_build_object('params_sha256', repeat('a', 64), 'session_id', 's-admit') || p)
$$;
create function tests.counted(p_key text) returns int language sql security definer as $$
  select coalesce(sum(c.calls), 0)::int from kiwi_internal.rate_limit_counters c
    join public.rate_limits l on l.id = c.limit_id where l.key = p_key
$$;
create function tests.contexts() returns int language sql security definer as $$
  select count(*)::int from public.execution_contexts where session_id = 's-admit'
$$;
grant execute on function tests.admit(jsonb), tests.counted(text), tests.contexts() to anon, authenticated, service_role;
create temp table answers (name text primary key, answer jsonb);
grant all on answers to anon, authenticated, service_role;

-- running a directive at the top level: allowed, and its child context opened in the same call
select tests.act_as_user('owner');
insert into answers
  select 'parent', tests.admit('{"tool_id": "adm_parent", "version": "1.0.0", "open_context": true}');
select is((select answer ->> 'allowed' from answers where name = 'parent'), 'true',
  'running a directive is allowed and its context opened in one call');
select is((select answer #> '{opened,directive}' from answers where name = 'parent'), '"adm_parent@1.0.0"'::jsonb,
  'the opened context follows the directive run');
select is((select answer #> '{opened,permissions,tools}' from answers where name = 'parent'),
  '["hello_world", "adm_*"]'::jsonb, 'and holds what the directive declares');
select is((select answer -> 'context' from answers where name = 'parent'), 'null'::jsonb,
  'a call under no context reads none');
select is(public.get_context((select (answer #>> '{opened,id}')::uuid from answers where name = 'parent')) ->> 'session_id',
  's-admit', 'the opened context is the caller''s own, in the call''s session');

-- a call under that context: the context comes back with the verdict
insert into answers select 'hello', tests.admit(jsonb_build_object(
  'tool_id', 'hello_world', 'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent'),
  'needs', '{"tools": ["hello_world"], "shell": ["bash"]}'::jsonb));
select is((select answer ->> 'allowed' from answers where name = 'hello'), 'true',
  'a call its context allows is allowed');
select is((select answer #>> '{context,id}' from answers where name = 'hello'),
  (select answer #>> '{opened,id}' from answers where name = 'parent'),
  'the answer carries the context it was checked against');
select is((select answer -> 'opened' from answers where name = 'hello'), 'null'::jsonb,
  'a call that runs no directive opens nothing');

-- a need the context lacks: refused before anything is counted
insert into answers select 'lacking', tests.admit(jsonb_build_object(
  'tool_id', 'format_bytes', 'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent'),
  'needs', '{"tools": ["format_bytes"]}'::jsonb));
select is((select answer ->> 'kind' from answers where name = 'lacking'), 'permission_denied',
  'a tool the context does not allow is refused as permission_denied');
select is((select answer ->> 'permission' from answers where name = 'lacking'),
  'tools: format_bytes is not allowed by ["hello_world", "adm_*"]', 'naming the permission it lacks');
select is(tests.counted('format_bytes'), 0, 'a call its context refuses takes nothing from the rate limits');

-- a directive wider than its parent: refused, and nothing it did stays
insert into answers select 'wide', tests.admit(jsonb_build_object(
  'tool_id', 'adm_wide', 'version', '1.0.0', 'open_context', true,
  'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent')));
select is((select answer ->> 'kind' from answers where name = 'wide'), 'permission_denied',
  'a directive run under a context cannot widen it');
select is((select answer ->> 'permission' from answers where name = 'wide'),
  'permissions.tools: "*" is wider than the parent''s ["hello_world", "adm_*"]',
  'the refusal names the permission, as open_context does');
select is(tests.counted('adm_wide'), 0, 'a directive refused for widening takes nothing from the rate limits');
select is(tests.contexts(), 1, 'and opens no context');

-- a narrower directive under it: its child's parent is the context
insert into answers select 'narrow', tests.admit(jsonb_build_object(
  'tool_id', 'adm_narrow', 'version', '1.0.0', 'open_context', true,
  'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent')));
select is((select answer #>> '{opened,parent_id}' from answers where name = 'narrow'),
  (select answer #>> '{opened,id}' from answers where name = 'parent'),
  'a directive run under a context opens its child under that context');

-- a directive under an approval policy is held, and opens nothing
insert into answers select 'policed', tests.admit('{"tool_id": "adm_policed", "version": "1.0.0", "open_context": true}');
select is((select answer ->> 'kind' from answers where name = 'policed'), 'approval_pending',
  'a directive a policy covers is held for approval');
select is(tests.contexts(), 2, 'and opens no context until it is allowed');

-- another caller's context: not found, whatever is asked of it
select tests.act_as_user('stranger');
select throws_ok(format($$select tests.admit(%L)$$, jsonb_build_object(
  'tool_id', 'hello_world', 'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent'),
  'needs', '{"tools": ["hello_world"]}'::jsonb)), 'PT404', null,
  'another caller''s context is not found');
select throws_ok(format($$select tests.admit(%L)$$, jsonb_build_object(
  'tool_id', 'adm_narrow', 'version', '1.0.0', 'open_context', true,
  'context_id', (select answer #>> '{opened,id}' from answers where name = 'parent'))), 'PT404', null,
  'nobody opens a directive''s context under another caller''s context');
select is(tests.contexts(), 2, 'and nothing was opened for them');

-- an expired context is refused as get_context refuses it
select tests.act_as_admin();
update execution_contexts set expires_at = now() - interval '1 second'
 where id = (select (answer #>> '{opened,id}')::uuid from answers where name = 'narrow');
select tests.act_as_user('owner');
select throws_like(format($$select tests.admit(%L)$$, jsonb_build_object(
  'tool_id', 'hello_world', 'context_id', (select answer #>> '{opened,id}' from answers where name = 'narrow'))),
  'context % expired at %', 'an expired context is refused');

-- anonymous callers open no context
select tests.act_as_user('anon');
select is(tests.admit('{"tool_id": "adm_parent", "version": "1.0.0", "open_context": true}') ->> 'kind',
  'permission_denied', 'an anonymous caller cannot run a directive: it would open a context');

-- bad input is named
select tests.act_as_user('owner');
select throws_ok($$select tests.admit('{"tool_id": "hello_world", "context_id": "x", "open_context": "yes"}')$$,
  '22023', 'invalid call: context_id: must be a uuid; open_context: must be true or false',
  'bad fields are named, and nothing is checked');
select throws_ok($$select tests.admit('{"tool_id": "hello_world", "needs": {"fs_read": ["/etc"]}}')$$,
  '22023', 'invalid call: needs: with a context_id, {shell, mcp, tools, net, fs_read, fs_write}, each a list of names',
  'needs are checked under a context only');

select * from finish();
rollback;
