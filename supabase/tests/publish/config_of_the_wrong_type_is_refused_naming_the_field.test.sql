-- A config value its chain's contract does not allow (type, enum, bounds, a required key)
-- is refused by its path, at any depth, whichever element of the chain set it.
begin;
\ir ../_setup.sql
select plan(11);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[]') returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.api(p_config jsonb) returns jsonb language sql as $$
  select jsonb_build_object('tool_id', 'typed_api', 'tool_type', 'api', 'executor', 'http_client',
                            'version', '1.0.0', 'config', jsonb_build_object('url', 'http://example.test') || p_config)
$$;
create function tests.script(p_config jsonb) returns jsonb language sql as $$
  select jsonb_build_object('tool_id', 'typed_script', 'tool_type', 'script', 'executor', 'python_runtime',
                            'version', '1.0.0', 'config', p_config)
$$;
create function tests.files() returns jsonb language sql as $$ select '[{"path": "main.py", "content_text": "1"}]'::jsonb $$;

select is(tests.refusal(tests.script('{"timeout": "5"}'), tests.files()),
  'invalid manifest: config.timeout: must be a number, not "5"', 'a timeout given as text is refused naming config.timeout');
select matches(tests.refusal(tests.script('{"timeout": 0}'), tests.files()),
  'config\.timeout: must be more than 0, not 0', 'a timeout must be positive');
select matches(tests.refusal(tests.script('{"requires": "humanize"}'), tests.files()),
  'config\.requires: must be a list, not "humanize"', 'requires is a list');
select matches(tests.refusal(tests.script('{"requires": ["ok", 3]}'), tests.files()),
  'config\.requires\[2\]: must be a string, not 3', 'each item of a list is checked, named by its position');
select matches(tests.refusal(tests.api('{"retries": 1.5}')),
  'config\.retries: must be a whole number, not 1\.5', 'retries is a whole number');
select matches(tests.refusal(tests.api('{"retries": -1}')),
  'config\.retries: must be at least 0, not -1', 'retries is at least 0');
select matches(tests.refusal(tests.api('{"retryable_statuses": [503, 99]}')),
  'config\.retryable_statuses\[2\]: must be at least 100, not 99', 'a retryable status is an HTTP status');
select matches(tests.refusal(tests.api('{"auth": {"type": "oauth", "token": "x"}}')),
  'config\.auth\.type: "oauth" is not one of bearer, basic, api_key', 'auth types are the three the runner knows');
select matches(tests.refusal(tests.api('{"retry": {"attempts": "three"}}')),
  'config\.retry\.attempts: must be a number, not "three"', 'an old spelling''s value is checked where it was written');
select matches(tests.refusal('{"tool_id": "typed_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                               "config": {"validation": {"rules": [{"command": "true"}, {"type": "pattern_check", "block": "yes"}]}}}'),
  'config\.validation\.rules\[1\]\.type: required; config\.validation\.rules\[2\]\.block: must be true or false, not "yes"',
  'validation rules are checked item by item');
select matches(tests.refusal('{"tool_id": "typed_thread", "tool_type": "thread", "executor": "llm_runtime", "version": "1.0.0",
                               "config": {"directive": "create_script_tool", "tiers": {"mine": {"provider": "anthropic"}},
                                          "budget": {"tokens": 0}}}'),
  'config\.tiers\.mine\.model: required; config\.budget\.tokens: must be at least 1, not 0',
  'a runtime''s own keys are checked as deep as its contract describes them');

select * from finish();
rollback;
