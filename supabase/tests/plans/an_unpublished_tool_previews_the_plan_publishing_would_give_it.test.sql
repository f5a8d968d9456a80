begin;
\ir ../_setup.sql
select plan(18);
select tests.make_acme();

-- every seed tool: its stored manifest and files, previewed, give its published plan
select is(
  (select array_agg(t.ref order by t.ref)
     from public.tools t join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
    where public.preview_execution_plan(v.manifest,
            (select coalesce(jsonb_agg(jsonb_build_object('path', f.path, 'content_text', f.content_text)), '[]')
               from public.tool_version_files f where f.version_id = v.id)) - 'shadows'
          is distinct from public.resolve_execution_plan(t.ref)),
  null,
  'a published version''s manifest and files preview to exactly its plan (config, chain, parameters, files, content_hash)');

-- a local script on a runtime of its own: the executor's config merged under the tool's
select tests.publish('preview_rt', 'runtime', 'subprocess', '1.0.0',
  '{"timeout": 100, "env": {"A": "rt", "B": "rt"}, "args": ["{entrypoint}"]}');
create temporary table preview on commit drop as
select public.preview_execution_plan(
  '{"tool_id": "preview_local", "tool_type": "script", "executor": "preview_rt", "version": "0.1.0",
    "entrypoint": "run.sh", "config": {"timeout": 5, "env": {"B": "local"}},
    "parameters": [{"name": "word", "type": "string", "required": true}]}',
  '[{"path": "run.sh", "content_text": "echo hi\n"}, {"path": "lib/data.txt", "content_text": "x"}]') as p;

select is((select jsonb_path_query_array(p, '$.chain[*].tool_id') from preview),
          '["preview_local", "preview_rt", "subprocess"]'::jsonb, 'the chain is the tool, then its executor''s chain');
select is((select p -> 'config' from preview),
          (select kiwi_internal.jsonb_deep_merge(resolve_execution_plan('preview_rt') -> 'config',
                                                 '{"timeout": 5, "env": {"B": "local"}}')),
          'the config is the executor''s plan config deep-merged with the tool''s, the tool winning');
select is((select p #> '{config,env}' from preview), '{"A": "rt", "B": "local"}'::jsonb,
          'nested objects merge key by key');
select is((select p ->> 'primitive' from preview), 'subprocess', 'the primitive comes from the executor''s chain');
select is((select p #> '{parameters,required}' from preview), '["word"]'::jsonb, 'parameters become a JSON Schema');
select is((select p ->> 'content_hash' from preview),
          (select kiwi_internal.content_hash(p -> 'manifest', p -> 'files') from preview),
          'the content_hash is computed as publish computes it');
select is((select p #> '{chain,0,content_hash}' from preview), (select p -> 'content_hash' from preview),
          'the chain''s first link carries that hash');
select is((select jsonb_path_query_array(p, '$.files[*] ? (@.is_entrypoint == true).path') from preview),
          '["run.sh"]'::jsonb, 'the entrypoint is marked');
select is((select p #>> '{files,1,sha256}' from preview), kiwi_internal.sha256_hex(E'echo hi\n'),
          'files carry their sha256, sorted by path');
select is((select count(*)::int from public.tools where ref = 'preview_local'), 0, 'a preview writes nothing');
select is((select p -> 'shadows' from preview), 'null'::jsonb, 'a tool the registry does not hold shadows nothing');
select is(public.preview_execution_plan('{"tool_id": "preview_rt", "tool_type": "runtime", "executor": "subprocess", "version": "9.0.0"}') ->> 'shadows',
          '1.0.0', 'a local tool of a published identity names the registry''s latest version it shadows');

-- knowledge has no executor: its chain is itself
select is(public.preview_execution_plan('{"tool_id": "preview_note", "tool_type": "knowledge", "version": "1.0.0"}',
                                        '[{"path": "note.md", "content_text": "# hi"}]') -> 'chain' -> 0 ->> 'tool_id',
          'preview_note', 'knowledge previews with a chain of itself and no executor');

-- refusals, named as publish names them
select throws_ok($$ select public.preview_execution_plan('{"tool_id": "p", "tool_type": "script", "executor": "no_such_runtime", "version": "1.0.0"}', '[{"path": "a.sh", "content_text": "echo"}]') $$,
  'PT404', 'executor "no_such_runtime" of tool "p" not found', 'an unknown executor is named with the tool');
select throws_ok($$ select public.preview_execution_plan('{"tool_id": "p", "tool_type": "script", "executor": "subprocess", "version": "1.0.0"}', '[{"path": "a.sh", "content_text": "echo"}]') $$,
  'PT422', 'tool "p" (script) cannot execute on "subprocess" (primitive): a script executes on runtime',
  'the executor matrix is checked');
select throws_like($$ select public.preview_execution_plan('{"tool_id": "p", "tool_type": "script", "executor": "bash_runtime", "version": "1.0", "visibility": "everyone"}', '[]') $$,
  'invalid manifest: %version%visibility%', 'bad fields are all named');

-- anyone may preview on what they can see; a private executor of another namespace is missing
select tests.act_as_user('anon');
select throws_ok($$ select public.preview_execution_plan('{"tool_id": "p", "tool_type": "runtime", "executor": "acme/private_tool", "version": "1.0.0"}') $$,
  'PT404', 'executor "acme/private_tool" of tool "p" not found', 'an executor the caller cannot see is not found');
select tests.act_as_admin();

select * from finish();
rollback;
