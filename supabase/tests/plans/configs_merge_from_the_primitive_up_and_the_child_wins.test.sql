begin;
\ir ../_setup.sql
select plan(12);

-- the merge function itself
select is(kiwi_internal.jsonb_deep_merge('{"a": {"x": 1, "y": 2}}', '{"a": {"y": 3, "z": 4}}'),
          '{"a": {"x": 1, "y": 3, "z": 4}}'::jsonb, 'nested objects merge key by key');
select is(kiwi_internal.jsonb_deep_merge('{"args": [1, 2, 3]}', '{"args": [9]}'),
          '{"args": [9]}'::jsonb, 'arrays are replaced, not concatenated');
select is(kiwi_internal.jsonb_deep_merge('{"t": 1, "keep": true}', '{"t": "one"}'),
          '{"t": "one", "keep": true}'::jsonb, 'scalars are replaced, whatever their type');
select is(kiwi_internal.jsonb_deep_merge('{"env": {"A": "1"}}', '{"env": "none"}'),
          '{"env": "none"}'::jsonb, 'a scalar in the child replaces an object in the parent');
select is(kiwi_internal.jsonb_deep_merge('{"env": "none"}', '{"env": {"A": "1"}}'),
          '{"env": {"A": "1"}}'::jsonb, 'an object in the child replaces a scalar in the parent');
select is(kiwi_internal.jsonb_deep_merge('{"a": 1}', '{"a": null}'),
          '{"a": null}'::jsonb, 'an explicit null in the child wins');

-- four levels: primitive <- base runtime <- runtime <- script, each overriding some keys
-- (lvl_base declares the key `deep` in its config contract: subprocess's does not have it)
select public.publish_tool_version(
  '{"tool_id": "lvl_base", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "config_schema": {"properties": {"deep": {"type": "object"}}},
    "config": {"timeout": 100, "env": {"BASE": "b", "SHARED": "base"}, "args": ["base"], "deep": {"l1": {"l2": {"from_base": 1, "over": "base"}}}}}');
select tests.publish('lvl_runtime', 'runtime', 'lvl_base', '1.0.0',
  '{"env": {"RUNTIME": "r", "SHARED": "runtime"}, "args": ["runtime", "{entrypoint}"], "deep": {"l1": {"l2": {"over": "runtime", "from_runtime": 2}}}}');
select public.publish_tool_version(
  '{"tool_id": "lvl_script", "tool_type": "script", "executor": "lvl_runtime", "version": "1.0.0",
    "config": {"timeout": 5, "env": {"SHARED": "script"}, "deep": {"l1": {"l2": {"over": "script"}, "l2b": true}}}}',
  '[{"path": "main.sh", "content_text": "echo hi"}]');

create temporary table plan_under_test on commit drop as select resolve_execution_plan('lvl_script') as p;

select is((select jsonb_array_length(p -> 'chain') from plan_under_test), 4, 'the plan''s chain has the four levels');
select is((select jsonb_path_query_array(p, '$.chain[*].tool_id') from plan_under_test),
          '["lvl_script", "lvl_runtime", "lvl_base", "subprocess"]'::jsonb, 'the chain runs from the tool to the primitive');
select is((select p -> 'config' -> 'env' from plan_under_test),
          '{"BASE": "b", "RUNTIME": "r", "SHARED": "script"}'::jsonb,
          'env merges across all levels and the nearest definition wins');
select is((select p -> 'config' -> 'deep' from plan_under_test),
          '{"l1": {"l2": {"from_base": 1, "over": "script", "from_runtime": 2}, "l2b": true}}'::jsonb,
          'objects merge recursively four levels deep, the child winning at every level');
select is((select p -> 'config' -> 'args' from plan_under_test), '["runtime", "{entrypoint}"]'::jsonb,
          'arrays come whole from the nearest level that defines them');
select is((select (p -> 'config' ->> 'timeout')::int from plan_under_test), 5,
          'a scalar set by the tool overrides its runtime and the primitive');

select * from finish();
rollback;
