begin;
\ir ../_setup.sql
select plan(8);

select public.publish_tool_version(
  '{"tool_id": "hashed", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
  '[{"path": "run.sh", "content_text": "echo héllo\n"}]');

select is((select f.sha256 from tool_version_files f join tool_versions v on v.id = f.version_id
             join tools t on t.id = v.tool_uuid where t.ref = 'hashed'),
          encode(sha256(convert_to(E'echo héllo\n', 'UTF8')), 'hex'), 'the database computes each file''s sha256');
select is((select f.size_bytes from tool_version_files f join tool_versions v on v.id = f.version_id
             join tools t on t.id = v.tool_uuid where t.ref = 'hashed'),
          12::bigint, 'and its size in bytes (UTF-8: é takes two)');
select is((select f.media_type from tool_version_files f join tool_versions v on v.id = f.version_id
             join tools t on t.id = v.tool_uuid where t.ref = 'hashed'),
          'text/x-shellscript', 'and a media type from the extension');

select throws_ok($$ select public.publish_tool_version(
    '{"tool_id": "badsha", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
    jsonb_build_array(jsonb_build_object('path', 'a.sh', 'content_text', 'echo', 'sha256', repeat('a', 64)))) $$,
  '22023', 'invalid manifest: files[1].sha256: does not match the content of "a.sh"',
  'a sha256 that disagrees with the content is refused');

select throws_ok($$ insert into tool_version_files (version_id, path, content_text, sha256, size_bytes, media_type)
                    select v.id, 'x.sh', 'echo', repeat('b', 64), 4, 'text/plain' from tool_versions v limit 1 $$,
  '23514', null, 'the table refuses a wrong sha256 even from an admin');

-- content_hash binds manifest and files: checked at commit (forced here)
savepoint before_extra_file;
insert into tool_version_files (version_id, path, content_text)
select v.id, 'extra.sh', 'echo sneaky' from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'hashed';
select throws_like($$ set constraints all immediate $$,
  'content_hash of hashed@1.0.0 does not match its manifest and files%',
  'a file slipped into a published version is refused at commit');
rollback to savepoint before_extra_file;

savepoint before_bad_version;
insert into tool_versions (tool_uuid, version, executor_id, manifest, content_hash)
select t.id, '9.0.0', 'bash_runtime',
       '{"tool_id": "hashed", "tool_type": "script", "executor": "bash_runtime", "version": "9.0.0"}', repeat('c', 64)
  from tools t where t.ref = 'hashed';
select throws_like($$ set constraints all immediate $$,
  'content_hash of hashed@9.0.0 does not match its manifest and files%',
  'a version whose content_hash was not computed from its content is refused at commit');
rollback to savepoint before_bad_version;

select is(kiwi_internal.content_hash('{"b": 1.50, "a": [1e3, "x"]}', '[{"path": "z", "sha256": "00"}, {"path": "a", "sha256": "11"}]'),
          kiwi_internal.sha256_hex(E'kiwi-content-v1\n{"a":[1000,"x"],"b":1.5}\na\t11\nz\t00\n'),
          'content_hash is the documented framing of canonical JSON and sorted file hashes');

select * from finish();
rollback;
