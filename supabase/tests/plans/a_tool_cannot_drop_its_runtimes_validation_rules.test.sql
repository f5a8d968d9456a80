-- Lists are replaced when configs merge, except a list an element's config_schema marks
-- "x-merge": "append": subprocess marks validation.rules, so a tool (or a runtime on a
-- runtime) adds its rules after those below it and can never remove them, whatever it
-- writes in its config or its own config_schema.
begin;
\ir ../_setup.sql
select plan(17);

create temporary table bash_rules on commit drop as
select resolve_execution_plan('bash_runtime') #> '{config,validation,rules}' as r;
select is((select jsonb_array_length(r) from bash_rules), 3, 'bash_runtime has its three rules (the fixture)');
select ok((select r @> '[{"block": true}]' from bash_rules), 'one of them blocks');

-- 1. an empty list
select tests.publish('drop_rules', 'script', 'bash_runtime', '1.0.0', '{"validation": {"rules": []}}');
select is(resolve_execution_plan('drop_rules') #> '{config,validation,rules}', (select r from bash_rules),
          'a tool that writes rules: [] still has every rule of its runtime');

-- 2. rules of its own
select tests.publish('own_rules', 'script', 'bash_runtime', '1.0.0',
  '{"validation": {"rules": [{"type": "pattern_check", "patterns": {"mine": ["TODO"]}, "warn_only": true, "message": "mine"}]}}');
select is(resolve_execution_plan('own_rules') #> '{config,validation,rules}',
          (select r from bash_rules)
            || '[{"type": "pattern_check", "patterns": {"mine": ["TODO"]}, "warn_only": true, "message": "mine"}]'::jsonb,
          'a tool''s own rules come after its runtime''s, which all stay');

-- 3. the old spelling (validation: {patterns: [...]}) is normalised into rules, then appended too
select tests.publish('old_rules', 'script', 'bash_runtime', '1.0.0',
  '{"validation": {"patterns": [{"pattern": "TODO", "action": "warn", "message": "old"}]}}');
select is(jsonb_path_query_array(resolve_execution_plan('old_rules'), '$.config.validation.rules[*].message'),
          jsonb_path_query_array((select r from bash_rules), '$[*].message') || '["old"]'::jsonb,
          'rules written in the old spelling are appended after the runtime''s as well');

-- 4. a tool that widens its own contract cannot unmark the list nor replace what holds it
select public.publish_tool_version(
  '{"tool_id": "unmark_rules", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config_schema": {"properties": {"validation": {"properties": {"rules": {"type": "array"}}}}},
    "config": {"validation": {"rules": []}}}',
  '[{"path": "main.sh", "content_text": "echo ok"}]');
select is(resolve_execution_plan('unmark_rules') #> '{config,validation,rules}', (select r from bash_rules),
          'a tool''s own config_schema cannot unmark a list its chain marks');
select public.publish_tool_version(
  '{"tool_id": "null_rules", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config_schema": {"properties": {"validation": true}},
    "config": {"validation": null}}',
  '[{"path": "main.sh", "content_text": "echo ok"}]');
select is(resolve_execution_plan('null_rules') #> '{config,validation,rules}', (select r from bash_rules),
          'a value that is no object does not replace the object holding the rules');
select public.publish_tool_version(
  '{"tool_id": "string_rules", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "config_schema": {"properties": {"validation": {"properties": {"rules": true}}}},
    "config": {"validation": {"rules": "none"}}}',
  '[{"path": "main.sh", "content_text": "echo ok"}]');
select is(resolve_execution_plan('string_rules') #> '{config,validation,rules}', (select r from bash_rules),
          'a value that is no list adds nothing to the rules');

-- 5. a runtime on bash_runtime cannot drop them for the scripts on it either
select tests.publish('strict_bash', 'runtime', 'bash_runtime', '1.0.0', '{"validation": {"rules": []}}');
select tests.publish('on_strict_bash', 'script', 'strict_bash', '1.0.0', '{"validation": {"rules": []}}');
select is(resolve_execution_plan('on_strict_bash') #> '{config,validation,rules}', (select r from bash_rules),
          'two levels above the runtime, every rule is still there');

-- 6. other lists are still replaced
select is(resolve_execution_plan('drop_rules') #> '{config,args}', '["{entrypoint}"]'::jsonb,
          'an unmarked list (args) still comes whole from the nearest level');
select tests.publish('own_args', 'script', 'bash_runtime', '1.0.0', '{"args": ["-x", "{entrypoint}"]}');
select is(resolve_execution_plan('own_args') #> '{config,args}', '["-x", "{entrypoint}"]'::jsonb,
          'a tool''s own unmarked list replaces its runtime''s');

-- 7. a mark binds the elements above the one that declares it, not those below
select public.publish_tool_version(
  '{"tool_id": "pass_rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config_schema": {"properties": {"env_passthrough": {"type": "array", "x-merge": "append"}}},
    "config": {"command": "bash", "env_passthrough": ["RT_*"]}}');
select tests.publish('on_pass_rt', 'script', 'pass_rt', '1.0.0', '{"env_passthrough": ["TOOL_*"]}');
select is(resolve_execution_plan('pass_rt') #> '{config,env_passthrough}', '["RT_*"]'::jsonb,
          'a runtime''s own mark does not bind its primitive: its list replaces the primitive''s');
select is(resolve_execution_plan('on_pass_rt') #> '{config,env_passthrough}', '["RT_*", "TOOL_*"]'::jsonb,
          'it binds the tools above it: theirs is appended');

-- 8. a preview gives what publishing gives
select is(public.preview_execution_plan(
            (select v.manifest from public.tool_versions v join public.tools t on t.id = v.tool_uuid
              where t.ref = 'own_rules' and v.is_latest),
            '[{"path": "main.sh", "content_text": "echo ok"}]') -> 'config',
          resolve_execution_plan('own_rules') -> 'config',
          'a preview merges as publish does: the runtime''s rules, then the tool''s');

-- 9. the keyword is checked like any other
select throws_like($$ select public.publish_tool_version('{"tool_id": "bad_mark", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config_schema": {"properties": {"env_passthrough": {"type": "array", "x-merge": "replace"}}}}') $$,
  '%config_schema.properties.env_passthrough.x-merge: "append"%', 'x-merge takes "append" only');
select throws_like($$ select public.publish_tool_version('{"tool_id": "bad_mark", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config_schema": {"properties": {"env": {"type": "object", "x-merge": "append"}}}}') $$,
  '%config_schema.properties.env.x-merge: marks a list: give type: array beside it%', 'x-merge marks a list');
select throws_like($$ select public.publish_tool_version('{"tool_id": "bad_mark", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config_schema": {"properties": {"steps": {"type": "array", "items": {"type": "array", "x-merge": "append"}}}}}') $$,
  '%config_schema.properties.steps.items: x-merge marks a key reached through properties only%',
  'x-merge inside a list''s items would be ignored, so it is refused');

select * from finish();
rollback;
