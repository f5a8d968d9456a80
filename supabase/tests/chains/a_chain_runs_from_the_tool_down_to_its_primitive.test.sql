begin;
\ir ../_setup.sql
select plan(7);

select results_eq(
  $$ select depth, tool_id, tool_type, executor_id from resolve_executor_chain('format_bytes') $$,
  $$ values (0, 'format_bytes', 'script', 'python_runtime'),
            (1, 'python_runtime', 'runtime', 'subprocess'),
            (2, 'subprocess', 'primitive', null::text) $$,
  'a script''s chain lists the script, its runtime and the primitive, in depth order');

select is((select array_agg(version order by depth) from resolve_executor_chain('format_bytes')),
          array['1.0.0', '1.0.0', '1.0.0'], 'every link carries its latest version');

select is((select content_hash from resolve_executor_chain('hello_world') where depth = 0),
          (select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'hello_world' and v.is_latest),
          'each link carries the content_hash of that version');

select results_eq(
  $$ select depth, tool_id from resolve_executor_chain('kiwi_tool_authoring') $$,
  $$ values (0, 'kiwi_tool_authoring') $$,
  'knowledge has no executor: its chain is the one row of itself');

select results_eq(
  $$ select depth, tool_id from resolve_executor_chain('subprocess') $$,
  $$ values (0, 'subprocess') $$,
  'a primitive''s chain is itself');

select results_eq(
  $$ select tool_id from resolve_executor_chain('public/http_echo') order by depth $$,
  $$ values ('http_echo'), ('http_client') $$,
  'public/tool_id is the same reference as the bare tool_id');

select is((select manifest ->> 'description' from resolve_executor_chain('bash_runtime') where depth = 0),
          (select description from tools where ref = 'bash_runtime'),
          'each link carries its manifest');

select * from finish();
rollback;
