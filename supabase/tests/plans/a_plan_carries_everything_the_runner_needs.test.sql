begin;
\ir ../_setup.sql
select plan(10);

create temporary table p on commit drop as select resolve_execution_plan('format_bytes') as plan;

select is((select plan ->> 'tool_id' from p), 'format_bytes', 'the plan names the tool');
select is((select plan ->> 'primitive' from p), 'subprocess', 'the plan names the primitive that runs it');
select is((select plan ->> 'content_hash' from p),
          (select content_hash from resolve_executor_chain('format_bytes') where depth = 0),
          'the plan carries the version''s content_hash');
select is((select plan #> '{parameters,required}' from p), '["bytes"]'::jsonb,
          'parameters written as a list become a JSON Schema with required fields');
select is((select plan #> '{parameters,additionalProperties}' from p), 'false'::jsonb,
          'a schema made from a list refuses unknown parameters');
select is((select plan #> '{parameters,properties,binary}' from p),
          '{"type": "boolean", "default": false, "description": "Use powers of 1024 (KiB, MiB) instead of 1000."}'::jsonb,
          'each listed parameter keeps its type, default and description');
select is((select jsonb_path_query_array(plan, '$.files[*].path') from p), '["format_bytes.py"]'::jsonb,
          'the plan lists the tool''s files');
select is((select plan #>> '{files,0,sha256}' from p),
          (select kiwi_internal.sha256_hex(plan #>> '{files,0,content_text}') from p),
          'each file carries the sha256 of its content');
select is((select (plan #>> '{files,0,is_entrypoint}')::boolean from p), true, 'the entrypoint is marked');

select public.publish_tool_version(
  '{"tool_id": "schema_params", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}',
  '[{"path": "a.sh", "content_text": "echo"}]');
select is(resolve_execution_plan('schema_params') -> 'parameters',
          '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}'::jsonb,
          'parameters written as a JSON Schema pass through unchanged');

select * from finish();
rollback;
