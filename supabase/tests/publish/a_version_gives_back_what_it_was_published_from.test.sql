begin;
\ir ../_setup.sql
select plan(6);
select tests.make_acme();

select public.publish_tool_version(
  '{"tool_id": "source_kept", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "entrypoint": "run.sh"}',
  '[{"path": "run.sh", "content_text": "echo one\n"}, {"path": "lib/x.txt", "content_text": "x"}]',
  E'# written by hand\ntool_id:   source_kept\ntool_type: script\nexecutor: bash_runtime\nversion: "1.0.0"\nentrypoint: run.sh\n');
select public.publish_tool_version(
  '{"tool_id": "source_kept", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0", "entrypoint": "run.sh"}',
  '[{"path": "run.sh", "content_text": "echo two\n"}]');

select is(tool_version_source('source_kept', '1.0.0') ->> 'manifest_yaml',
          E'# written by hand\ntool_id:   source_kept\ntool_type: script\nexecutor: bash_runtime\nversion: "1.0.0"\nentrypoint: run.sh\n',
          'the YAML comes back exactly as written, comments and spacing included');
select is((select jsonb_agg(jsonb_build_array(f ->> 'path', f ->> 'content_text', f -> 'is_entrypoint'))
             from jsonb_array_elements(tool_version_source('source_kept', '1.0.0') -> 'files') f),
          '[["lib/x.txt", "x", false], ["run.sh", "echo one\n", true]]'::jsonb,
          'every file with its text and entrypoint mark, sorted by path');
select is(tool_version_source('source_kept') ->> 'version', '1.1.0', 'no version means the latest');
select is(tool_version_source('source_kept') -> 'manifest_yaml', 'null'::jsonb,
          'a version published without YAML says so (null)');
select throws_ok($$ select tool_version_source('source_kept', '9.9.9') $$,
  'PT404', 'version 9.9.9 of tool "source_kept" not found', 'an unknown version is named');

select tests.act_as_user('stranger');
select throws_ok($$ select tool_version_source('acme/private_tool') $$,
  'PT404', 'tool "acme/private_tool" not found', 'a private tool of another namespace is not found');
select tests.act_as_admin();

select * from finish();
rollback;
