-- A member's wider sandbox is refused, naming the field. Publishing a config whose
-- config.sandbox asks for more than its executor chain allows (a network entry, a host path
-- outside the allowed ones, a limit above the chain's), or that sets config.environment.sandbox
-- at all, is refused to anyone but an admin (42501), each field and value named, with the way
-- to get it: an admin publishes it, or approves exactly this content. The same or narrower
-- values publish. With an admin's approval of the content, the member publishes it once.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(11);
select tests.make_acme();

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
grant execute on function tests.hint_of(text) to authenticated;
create function tests.script(p_id text, p_config jsonb) returns jsonb language sql as $$
  select public.publish_tool_version(
    jsonb_build_object('tool_id', 'acme/' || p_id, 'tool_type', 'script', 'executor', 'bash_runtime',
                       'version', '1.0.0', 'config', p_config),
    '[{"path": "main.sh", "content_text": "echo"}]') $$;
grant execute on function tests.script(text, jsonb) to authenticated;

select tests.act_as_user('member');
select throws_ok($$select tests.script('net', '{"sandbox": {"network": ["evil.example:443"]}}')$$, '42501',
  'config.sandbox.network: "evil.example:443" is not allowed by its executor chain (bash_runtime: none); only an admin may widen a sandbox',
  'a network entry its chain does not allow is refused, naming it');
select is(tests.hint_of($$select tests.script('net', '{"sandbox": {"network": ["evil.example:443"]}}')$$),
  'an admin publishes it (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)',
  'with the way to get it');
select throws_ok($$select tests.script('fs', '{"sandbox": {"fs": {"read": ["/etc"]}}}')$$, '42501',
  'config.sandbox.fs.read: "/etc" is not under a path its executor chain allows (bash_runtime: none); only an admin may widen a sandbox',
  'a host path outside the allowed ones is refused');
select throws_ok($$select tests.script('fs_w', '{"sandbox": {"fs": {"write": ["/tmp/x"]}}}')$$, '42501',
  'config.sandbox.fs.write: "/tmp/x" is not under a path its executor chain allows to write (bash_runtime: none); only an admin may widen a sandbox',
  'so is a path to write');
select throws_ok($$select tests.script('mem', '{"sandbox": {"limits": {"memory_mb": 4096, "pids": 8}}}')$$, '42501',
  'config.sandbox.limits.memory_mb: 4096 is more than its executor chain allows (bash_runtime: 1024); only an admin may widen a sandbox',
  'a limit above the chain''s is refused (the lower one beside it is not named)');
select throws_ok($$select tests.script('env', '{"environment": {"steps": [{"command": "true"}], "sandbox": {"network": []}}}')$$, '42501',
  'config.environment.sandbox: only an admin-published runtime sets the sandbox of environment steps; only an admin may widen a sandbox',
  'any environment.sandbox is refused');
select is((select count(*)::int from tools where ref like 'acme/%' and ref <> all (array['acme/public_tool', 'acme/unlisted_tool', 'acme/private_tool'])),
  0, 'nothing was published');
select is(tests.script('same', '{"sandbox": {"network": [], "fs": {"read": [], "write": []}, "limits": {"memory_mb": 1024, "cpu_s": 10}}}') ->> 'created',
  'true', 'the same or narrower values publish');

-- with an admin's approval of this very content
select tests.act_as_admin();
create temporary table t (id uuid, why text);
grant all on t to authenticated, service_role;
create function tests.net_script() returns jsonb language sql as $$
  select '{"tool_id": "acme/approved_net", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
           "config": {"sandbox": {"network": ["api.example:443"]}}}'::jsonb $$;
grant execute on function tests.net_script() to authenticated;
select tests.act_as_user('member');
insert into t select (a ->> 'id')::uuid, a ->> 'why'
  from request_publish_approval(tests.net_script(), '[{"path": "main.sh", "content_text": "echo"}]', 's') a;
select is((select why from t),
  'config.sandbox.network: "api.example:443" is not allowed by its executor chain (bash_runtime: none); only an admin may widen a sandbox',
  'the member may ask an admin to approve it, the widening being why');
select tests.act_as_user('service_role');
select decide_approval((select id from t), true, 'reviewed');
select tests.act_as_user('member');
select is(publish_tool_version(tests.net_script(), '[{"path": "main.sh", "content_text": "echo"}]', null, null, (select id from t)) ->> 'created',
  'true', 'an admin''s approval of the content lets the member publish it');
select is(resolve_execution_plan('acme/approved_net') #> '{config,sandbox,network}', '["api.example:443"]'::jsonb,
  'and its plan has the network it asked for');

select * from finish();
rollback;
