-- Writes that choose a command need an admin. A primitive, runtime or mcp_server decides
-- the command of every tool that runs on it, builtin and official tools are the
-- platform's, and bare references resolve in the public namespace: publishing, yanking,
-- deprecating or deleting any of them is refused to everyone else (42501), naming why,
-- even to members of the namespace. The hijack: a user publishing bash_runtime 1.0.99
-- whose command is `bash -c "echo HIJACKED"` is refused, and the registry is unchanged.
-- An admin's new version of an executor lists the tools that run on it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(20);
select tests.make_acme();

-- The hint of the error p_sql raises.
create function tests.hint_of(p_sql text) returns text language plpgsql as $$
declare
  v_hint text;
begin
  execute p_sql;
  return null;
exception when others then
  get stacked diagnostics v_hint = pg_exception_hint;
  return v_hint;
end $$;
grant execute on function tests.hint_of(text) to anon, authenticated, service_role;
create temporary table before as
  select t.ref, t.latest_version, (select array_agg(v.version order by v.version) from tool_versions v where v.tool_uuid = t.id) as versions,
         resolve_execution_plan('hello_world') -> 'config' as hello_config
    from tools t where t.ref = 'bash_runtime';
grant select on before to authenticated;
-- even a member of the public namespace is not an admin
insert into namespace_members (namespace, user_id, role) values ('public', tests.member_id(), 'member');

select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(
    '{"tool_id": "bash_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.99",
      "config": {"command": "bash", "args": ["-c", "echo HIJACKED", "{entrypoint}"]}}')$$,
  '42501', 'only an admin may publish tool "bash_runtime": it is a runtime, which chooses the command of every tool that runs on it; it is in the public namespace',
  'the hijack is refused, naming why');
select is(tests.hint_of($$select publish_tool_version(
    '{"tool_id": "bash_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.99",
      "config": {"command": "bash", "args": ["-c", "echo HIJACKED", "{entrypoint}"]}}')$$),
  'an admin publishes it (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)',
  'with the hint to ask an admin, or for an approval');
select throws_ok($$select publish_tool_version('{"tool_id": "member_tool", "tool_type": "script", "executor": "bash_runtime",
                                                  "version": "1.0.0"}', '[{"path": "a.sh", "content_text": "echo"}]')$$,
  '42501', 'only an admin may publish tool "member_tool": it is in the public namespace',
  'membership of the public namespace does not let anyone publish there');
select throws_ok($$select yank_tool_version('bash_runtime', '1.0.0')$$, '42501',
  'only an admin may yank tool "bash_runtime": it is a runtime, which chooses the command of every tool that runs on it; it is builtin; it is in the public namespace',
  'nor yank a runtime');
select is(tests.hint_of($$select yank_tool_version('bash_runtime', '1.0.0')$$),
  'an admin yanks it (kiwi --admin yank ...), or ask an admin', 'the hint names the action');
select throws_ok($$select deprecate_tool_version('subprocess', '1.0.0')$$, '42501', null, 'nor deprecate a primitive');
select throws_ok($$select delete_tool('hello_world')$$, '42501',
  'only an admin may delete tool "hello_world": it is in the public namespace', 'nor delete a tool of the public namespace');

select tests.act_as_admin();
select results_eq($$select t.ref, t.latest_version, (select array_agg(v.version order by v.version) from tool_versions v where v.tool_uuid = t.id),
                           resolve_execution_plan('hello_world') -> 'config'
                      from tools t where t.ref = 'bash_runtime'$$,
  $$select * from before$$, 'the registry is unchanged: bash_runtime, its versions and what hello_world runs');

-- in the member's own namespace too
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/my_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}')$$,
  '42501', 'only an admin may publish tool "acme/my_runtime": it is a runtime, which chooses the command of every tool that runs on it',
  'the owner of acme cannot publish a runtime into acme');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/my_server", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0"}')$$,
  '42501', 'only an admin may publish tool "acme/my_server": it is an mcp_server, which chooses the command of every tool that runs on it',
  'nor an MCP server');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/my_primitive", "tool_type": "primitive", "version": "1.0.0"}')$$,
  '42501', null, 'nor a primitive');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/blessed_script", "tool_type": "script", "executor": "bash_runtime",
                                                 "version": "1.0.0", "is_builtin": true}', '[{"path": "a.sh", "content_text": "echo"}]')$$,
  '42501', 'only an admin may publish tool "acme/blessed_script": it is builtin', 'nor mark a tool builtin');
select is(publish_tool_version('{"tool_id": "acme/plain_script", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                               '[{"path": "a.sh", "content_text": "echo"}]') ->> 'created', 'true',
  'an ordinary script in the owner''s namespace is published as before');

-- an admin publishes acme's runtime; its owner still cannot change it
select tests.act_as_user('service_role');
select is(publish_tool_version('{"tool_id": "acme/my_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}') ->> 'created',
  'true', 'an admin publishes a runtime into acme');
select ok(not (publish_tool_version('{"tool_id": "acme/lonely_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}')
               -> 'dependents' <> '[]'::jsonb), 'a new executor has no dependents yet');
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version('{"tool_id": "acme/my_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.1.0"}')$$,
  '42501', null, 'the owner cannot publish a new version of it');
select throws_ok($$select delete_tool('acme/my_runtime')$$, '42501',
  'only an admin may delete tool "acme/my_runtime": it is a runtime, which chooses the command of every tool that runs on it',
  'nor delete it');

-- an admin's new version of an executor says whom it changes
select tests.act_as_user('service_role');
create temporary table answer on commit drop as
  select publish_tool_version('{"tool_id": "bash_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.99",
                                "config": {"command": "bash", "args": ["{entrypoint}"]}}') as a;
select ok((select a -> 'dependents' ? 'hello_world' and a -> 'dependents' ? 'acme/private_tool' from answer),
  'a new version of bash_runtime lists the tools whose chain passes through it, private ones included (for the admin)');
select is((select (a ->> 'dependents_count')::int from answer),
  (select count(*)::int from tools where executor_id = 'bash_runtime' or executor_id in
     (select ref from tools where executor_id = 'bash_runtime')),
  'and counts them');
select is((select a -> 'dependents' from publish_tool_version('{"tool_id": "bash_runtime", "tool_type": "runtime", "executor": "subprocess",
                                                              "version": "1.0.50"}') as a), null,
  'a version that does not become latest changes nobody, and lists nobody');

select * from finish();
rollback;
