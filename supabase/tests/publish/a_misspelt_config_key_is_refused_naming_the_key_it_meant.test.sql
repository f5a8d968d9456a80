-- A config key no element of the tool's chain declares (config_schema, and its tool type's
-- in tool_type_rules) is refused by its path, with the closest key the chain does declare.
begin;
\ir ../_setup.sql
select plan(9);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[{"path": "main.sh", "content_text": "echo"}]')
  returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.script(p_config jsonb, p_executor text default 'bash_runtime') returns jsonb
  language sql as $$
  select jsonb_build_object('tool_id', 'typo_tool', 'tool_type', 'script', 'executor', p_executor,
                            'version', '1.0.0', 'config', p_config)
$$;

select is(tests.refusal(tests.script('{"timeuot": 5}')),
  'invalid manifest: config.timeuot: unknown key (did you mean timeout?)',
  'timeuot is refused, naming timeout');
select matches(tests.refusal(tests.script('{"timeuot_s": 5}')),
  'config\.timeuot_s: unknown key \(did you mean timeout\?\)',
  'a misspelt old spelling is refused naming the canonical key');
select matches(tests.refusal(tests.script('{"comand": "sh", "args": ["x"], "env_pasthrough": ["PATH"]}')),
  'config\.comand: unknown key \(did you mean command\?\); config\.env_pasthrough: unknown key \(did you mean env_passthrough\?\)',
  'every unknown key is named, each with its own suggestion');
select matches(tests.refusal(tests.script('{"zzqx": 1}')),
  'config\.zzqx: unknown key \(known: args, command, cwd, entrypoint, env, .*timeout, validation\)',
  'a key like none declared lists the keys that are');
select matches(tests.refusal(tests.script('{"validation": {"rules": [{"type": "pattern_check", "patterns": {"dangerous": ["x"]}, "blok": true}]}}')),
  'config\.validation\.rules\[1\]\.blok: unknown key \(did you mean block\?\)',
  'keys inside list items are checked, named by their position');
select matches(tests.refusal(tests.script('{"validation": {"rulez": []}}')),
  'config\.validation\.rulez: unknown key \(did you mean rules\?\)', 'keys of nested objects are checked');
select matches(tests.refusal('{"tool_id": "typo_api", "tool_type": "api", "executor": "http_client", "version": "1.0.0",
                               "config": {"url": "http://example.test", "retry": {"atempts": 2}}}', '[]'),
  'config\.retry\.atempts: unknown key \(did you mean attempts\?\)', 'the keys of an old spelling are checked too');
select matches(tests.refusal('{"tool_id": "typo_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config": {"command": "sh", "requires": ["x"]}}', '[]'),
  'config\.requires: unknown key', 'a key another runtime declares (python_runtime''s requires) is not this chain''s');
select matches(tests.refusal(tests.script('{"timeuot": 5}')), 'nothing was published|^invalid manifest',
  'the refusal is an invalid manifest (SQLSTATE 22023)');

select * from finish();
rollback;
