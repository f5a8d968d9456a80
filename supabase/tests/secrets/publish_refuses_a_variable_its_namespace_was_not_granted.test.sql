-- Publish refuses a variable its namespace was not granted. A ${VAR} in a member's config,
-- or an env_passthrough entry, reads the runner's environment: unless the chain's
-- admin-published elements already read it (bash_runtime's subprocess passes PATH, HOME,
-- ...) or an admin granted it to the tool's namespace, publish refuses it (42501), naming
-- the field and the variable, and saying how to get it. preview_execution_plan refuses a
-- member's local tool the same way. An admin may publish it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(9);
select tests.make_acme();

create function tests.script(p_id text, p_config jsonb) returns jsonb language sql as $$
  select jsonb_build_object('tool_id', 'acme/' || p_id, 'tool_type', 'script', 'executor', 'bash_runtime',
                            'version', '1.0.0', 'config', p_config) $$;
grant execute on function tests.script(text, jsonb) to authenticated;
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

select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(tests.script('leak', '{"env": {"LEAK": "${KIWI_TOKEN_KEY}"}}'),
                                               '[{"path": "main.sh", "content_text": "echo"}]')$$, '42501',
  'config.env.LEAK: ${KIWI_TOKEN_KEY} is not granted to namespace "acme"; an admin grants it (grant_secret) or publishes the tool',
  'an ungranted ${VAR} is refused, naming the field and the variable');
select is(tests.hint_of($$select publish_tool_version(tests.script('leak', '{"env": {"LEAK": "${KIWI_TOKEN_KEY}"}}'),
                                                      '[{"path": "main.sh", "content_text": "echo"}]')$$),
  'an admin grants the variable to the namespace (select grant_secret(namespace, variable)) or publishes the tool (kiwi --admin publish ...), or an admin approves this content for you (kiwi publish ... --request-approval)',
  'with how to get it');
select throws_ok($$select publish_tool_version(tests.script('pass', '{"env_passthrough": ["PATH", "AWS_*"]}'),
                                               '[{"path": "main.sh", "content_text": "echo"}]')$$, '42501',
  'config.env_passthrough: "AWS_*" is not granted to namespace "acme"; an admin grants it (grant_secret) or publishes the tool',
  'an ungranted env_passthrough entry is refused, naming it (PATH, which the runtime passes, is not)');
select throws_ok($$select publish_tool_version(tests.script('defaulted', '{"args": ["${OTHER_SECRET:-none}", "${HOME}"]}'),
                                               '[{"path": "main.sh", "content_text": "echo"}]')$$, '42501',
  'config.args[1]: ${OTHER_SECRET} is not granted to namespace "acme"; an admin grants it (grant_secret) or publishes the tool',
  'a ${VAR:-default} reads the variable too');
select is(publish_tool_version(tests.script('runtime_vars', '{"env": {"WHERE": "${HOME}/x"}, "env_passthrough": ["PATH", "TZ"]}'),
                               '[{"path": "main.sh", "content_text": "echo"}]') ->> 'created', 'true',
  'what its chain''s admin-published elements read publishes');

-- the same refusal in a preview of a local tool
select throws_ok($$select preview_execution_plan(tests.script('local_leak', '{"env": {"LEAK": "${KIWI_TOKEN_KEY}"}}'),
                                                 '[{"path": "main.sh", "content_text": "echo"}]')$$, '42501',
  'config.env.LEAK: ${KIWI_TOKEN_KEY} is not granted to namespace "acme"; an admin grants it (grant_secret) or publishes the tool',
  'a member''s preview refuses it the same way');
select is(preview_execution_plan(tests.script('local_ok', '{"env": {"WHERE": "${HOME}"}}'),
                                 '[{"path": "main.sh", "content_text": "echo"}]') -> 'allowed_variables',
  resolve_execution_plan('bash_runtime') -> 'allowed_variables',
  'and allows a local tool what its runtime reads');

-- an admin may
select tests.act_as_user('service_role');
select is(publish_tool_version(tests.script('admin_leak', '{"env": {"LEAK": "${KIWI_TOKEN_KEY}"}}'),
                               '[{"path": "main.sh", "content_text": "echo"}]') ->> 'created', 'true',
  'an admin publishes it');
select ok(resolve_execution_plan('acme/admin_leak') -> 'allowed_variables' ? 'KIWI_TOKEN_KEY',
  'and its plan allows the variable');

select * from finish();
rollback;
