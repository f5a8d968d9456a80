begin;
\ir ../_setup.sql
select plan(22);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[]') returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select matches(tests.refusal('[]'), 'manifest: must be a JSON object', 'a manifest must be an object');
select matches(tests.refusal('{"tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}'),
  'tool_id: required', 'tool_id is required');
select matches(tests.refusal('{"tool_id": "has space", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0"}'),
  'tool_id: "has space" is not a valid id', 'tool_id must be an id');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "gadget", "executor": "subprocess", "version": "1.0.0"}'),
  'tool_type: required, one of api, composite', 'tool_type must be one of the ten');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "script", "version": "1.0.0"}'),
  'executor: required for a script', 'an executable type needs an executor');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "knowledge", "executor": "subprocess", "version": "1.0.0"}'),
  'executor: a knowledge has no executor', 'knowledge takes no executor');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0"}'),
  'version: "1.0" is not a semantic version', 'version must be semver');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0+sha.1"}'),
  'no \+build metadata', 'build metadata is explained');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "exectuor": "y"}'),
  'exectuor: unknown field', 'a misspelt field is refused by name');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "tags": "a,b"}'),
  'tags: must be a list of strings', 'tags must be a list');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "secret"}'),
  'visibility: "secret" is not one of public, unlisted, private', 'visibility has three values');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "config": []}'),
  'config: must be an object', 'config must be an object');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                              "parameters": [{"name": "a", "type": "text"}, {"name": "a"}, {"type": "string"}]}'),
  'parameters\[1\]\.type: "text" is not one of .*parameters\[2\]\.name: "a" is declared twice.*parameters\[3\]\.name: required',
  'each bad parameter is named by its position');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
                              "parameters": {"type": "array"}}'),
  'parameters: a JSON Schema for parameters must have "type": "object"', 'a parameters schema must describe an object');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                             '[{"path": "/etc/passwd", "content_text": "x"}]'),
  'files\[1\]\.path: "/etc/passwd" must be relative', 'an absolute file path is refused');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                             '[{"path": "a.sh", "content_text": "x"}, {"path": "a.sh", "content_text": "y"}]'),
  'files\[2\]\.path: "a.sh" appears twice', 'a duplicate path is refused');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "entrypoint": "main.sh"}',
                             '[{"path": "a.sh", "content_text": "x"}]'),
  'entrypoint: "main.sh" is not among the files \(a.sh\)', 'an entrypoint must name a file');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                             '[{"path": "a.sh", "content_text": "x"}, {"path": "b.sh", "content_text": "y"}]'),
  'entrypoint: a script with several files must say which one runs', 'a multi-file script must name its entrypoint');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "runtime", "executor": "subprocess", "version": "1"}', '"no"'),
  'version: "1" is not a semantic version', 'problems are reported together with the first field first');

select matches(tests.refusal('{"tool_id": "x", "tool_type": "knowledge", "version": "1.0.0"}',
                             '[{"path": "a.md", "content_text": "x", "storage_key": "bucket/a.md"}]'),
  'files\[1\] \("a.md"\): give exactly one of content_text or storage_key', 'a file is either inline or in storage');
select matches(tests.refusal('{"tool_id": "x", "tool_type": "knowledge", "version": "1.0.0"}',
                             '[{"path": "big.bin", "storage_key": "bucket/big.bin"}]'),
  'a stored file needs its sha256 \(64 hex digits\) and size_bytes', 'a stored file must bring its hash and size');
select throws_ok($$ select public.publish_tool_version('{"tool_id": "x", "tool_type": "runtime", "version": "nope"}') $$,
  '22023', null, 'manifest errors carry SQLSTATE 22023 (invalid_parameter_value)');

select * from finish();
rollback;
