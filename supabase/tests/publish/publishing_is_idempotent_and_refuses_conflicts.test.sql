begin;
\ir ../_setup.sql
select plan(9);

create temporary table first on commit drop as
select public.publish_tool_version(
  '{"tool_id": "idem", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "description": "d"}',
  '[{"path": "a.sh", "content_text": "echo a"}]') as r;

select is((select r ->> 'created' from first), 'true', 'the first publish creates the version');
select is((select r -> 'executor_chain' from first), '["idem", "bash_runtime", "subprocess"]'::jsonb,
          'and answers with the chain it will run on');
select is((select r ->> 'is_latest' from first), 'true', 'and says it is the latest');

select is(
  public.publish_tool_version(
    '{"tool_id": "idem", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "description": "d"}',
    '[{"path": "a.sh", "content_text": "echo a"}]') - 'latest_version',
  jsonb_build_object('tool_id', 'idem', 'namespace', 'public', 'version', '1.0.0',
                     'content_hash', (select r ->> 'content_hash' from first), 'is_latest', true,
                     'created', false, 'unchanged', true),
  'publishing identical content again is a no-op that says so');
select is((select count(*)::int from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'idem'), 1,
          'and adds nothing');

select throws_like($$ select public.publish_tool_version(
    '{"tool_id": "idem", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "description": "d"}',
    '[{"path": "a.sh", "content_text": "echo CHANGED"}]') $$,
  'version 1.0.0 of tool "idem" is already published with different content',
  'the same version with other files is refused');
select throws_ok($$ select public.publish_tool_version(
    '{"tool_id": "idem", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "description": "other"}',
    '[{"path": "a.sh", "content_text": "echo a"}]') $$,
  'PT409', null, 'the same version with another manifest is refused with PT409');
select is((select f.content_text from tool_version_files f join tool_versions v on v.id = f.version_id
             join tools t on t.id = v.tool_uuid where t.ref = 'idem'), 'echo a', 'and the published content is untouched');

select throws_ok($$ select tests.publish('idem', 'runtime', 'subprocess', '2.0.0') $$, 'PT409',
  'tool "idem" is a script, not a runtime', 'a new version cannot change the tool''s type');

select * from finish();
rollback;
