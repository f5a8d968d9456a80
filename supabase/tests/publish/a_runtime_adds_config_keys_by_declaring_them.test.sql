-- Adding a config key to a runtime is a publish: the runtime declares the key in its
-- config_schema, and every tool on it may use it, with no change to the runner or the
-- registry's code. The contract is data, held to the subset of JSON Schema the validator
-- understands.
begin;
\ir ../_setup.sql
select plan(10);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[]') returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;
create function tests.on_rt(p_version text, p_config jsonb) returns jsonb language sql as $$
  select jsonb_build_object('tool_id', 'uses_rt', 'tool_type', 'script', 'executor', 'contract_rt',
                            'version', p_version, 'config', p_config)
$$;
create function tests.files() returns jsonb language sql as $$ select '[{"path": "main.sh", "content_text": "echo"}]'::jsonb $$;

select public.publish_tool_version('{"tool_id": "contract_rt", "tool_type": "runtime", "executor": "subprocess",
  "version": "1.0.0", "config": {"command": "bash", "args": ["{entrypoint}"]}}');
select matches(tests.refusal(tests.on_rt('1.0.0', '{"shell_flags": ["-e"]}'), tests.files()),
  'config\.shell_flags: unknown key', 'a key the runtime has not declared is refused');

select public.publish_tool_version('{"tool_id": "contract_rt", "tool_type": "runtime", "executor": "subprocess",
  "version": "1.1.0", "config": {"command": "bash", "args": ["{shell_flags...}", "{entrypoint}"], "shell_flags": []},
  "config_schema": {"properties": {"shell_flags": {"type": "array", "items": {"type": "string"}}},
                    "x-aliases": {"flags": "shell_flags"}}}');
select is(tests.refusal(tests.on_rt('1.0.0', '{"shell_flags": ["-e"]}'), tests.files()), 'published',
  'once the runtime''s new version declares it, a tool on it may set it');
select matches(tests.refusal(tests.on_rt('1.0.1', '{"shell_flags": "-e"}'), tests.files()),
  'config\.shell_flags: must be a list', 'and the runtime''s contract says what it must be');
select is((public.publish_tool_version(tests.on_rt('1.0.2', '{"flags": ["-u"]}'), tests.files())) -> 'normalised',
  '["config.flags -> config.shell_flags"]'::jsonb, 'an alias the runtime declares is honoured as data too');
select is((select v.manifest -> 'config' from public.tool_versions v join public.tools t on t.id = v.tool_uuid
            where t.ref = 'uses_rt' and v.version = '1.0.2'), '{"shell_flags": ["-u"]}'::jsonb,
  'and stored canonically');
select matches(tests.refusal('{"tool_id": "other_script", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
                               "config": {"shell_flags": ["-e"]}}', tests.files()),
  'config\.shell_flags: unknown key', 'a key one runtime declares is not another runtime''s');

-- the contract itself: the subset the validator understands, nothing it would ignore
select matches(tests.refusal('{"tool_id": "bad_contract", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config_schema": {"properties": {"name": {"type": "string", "minLength": 3}}}}'),
  'config_schema\.properties\.name\.minLength: not a keyword config contracts support', 'a keyword outside the subset is refused');
select matches(tests.refusal('{"tool_id": "bad_contract", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config_schema": {"properties": {"n": {"type": "text"}}, "x-aliases": {"old": {"to": "n", "spread": {}}}}}'),
  'config_schema\.x-aliases\.old: give exactly one of to, values, spread or append; config_schema\.properties\.n\.type: one of object, array, string',
  'a wrong type name and an ambiguous alias are refused by their paths');
select matches(tests.refusal('{"tool_id": "bad_contract", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config_schema": {"type": "array"}}'),
  'config_schema\.type: a config is an object', 'a contract describes an object');
select matches(tests.refusal('{"tool_id": "bad_contract", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config": {"size": 3}, "config_schema": {"properties": {"size": {"type": "string"}}}}'),
  'config\.size: must be a string, not 3', 'a runtime''s own config is held to its own contract');

select * from finish();
rollback;
