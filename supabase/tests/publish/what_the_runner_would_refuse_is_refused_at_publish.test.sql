-- Publish refuses what the runner would refuse, naming the field: a version longer than a
-- call names, a timeout over a day, two paths that are one name under NFC and case, a
-- media_type that is none, a schema with a remote $ref or a pattern that needs
-- backtracking, a tool more visible than its executor.
begin;
\ir ../_setup.sql
select plan(12);

insert into namespaces (namespace, owner_id) values ('rr_ns', tests.owner_id());

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[{"path": "run.sh", "content_text": "echo"}]')
  returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.script(p_more jsonb default '{}') returns jsonb language sql as $$
  select '{"tool_id": "rr_ns/t", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}'::jsonb || p_more
$$;

grant execute on all functions in schema tests to authenticated;
select tests.act_as('authenticated', tests.owner_id());

select matches(tests.refusal(tests.script(jsonb_build_object('version', '1.0.0-' || repeat('a', 100000)))),
  'version: 100006 characters, more than the maximum of 128',
  'a 100,000-character pre-release is refused naming the field and the maximum');
select is(tests.refusal(tests.script(jsonb_build_object('version', '1.0.0-' || repeat('a', 122)))), 'published',
  'a version of 128 characters is published');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "config": {"timeout": 1e308}}')),
  'config.timeout: .* a timeout is more than 0 and at most 86400',
  'timeout: 1e308 is refused naming its path');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "config": {"timeout_s": 90000}}')),
  'config.timeout: ', 'an old spelling is checked as the timeout it becomes');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "entrypoint": "run.sh"}'),
                             jsonb_build_array(jsonb_build_object('path', 'run.sh', 'content_text', 'x'),
                                               jsonb_build_object('path', 'caf' || U&'\00E9', 'content_text', 'a'),
                                               jsonb_build_object('path', 'cafe' || U&'\0301', 'content_text', 'b'))),
  'files\[3\].path: "cafe.*" and "caf.*" \(files\[2\]\) are one name once Unicode is normalised',
  'café in NFC and NFD is refused naming both');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "entrypoint": "run.sh"}'),
                             '[{"path": "run.sh", "content_text": "x"}, {"path": "Readme", "content_text": "a"},
                               {"path": "README", "content_text": "b"}]'),
  'files\[3\].path: "README" and "Readme" \(files\[2\]\)', 'Readme beside README is refused naming both');
select matches(tests.refusal(tests.script('{"version": "1.1.0"}'),
                             jsonb_build_array(jsonb_build_object('path', 'run.sh', 'content_text', 'x',
                                                                  'media_type', repeat('m', 1000000)))),
  'files\[1\].media_type: 1000000 characters starting "m+…" is not a media type',
  'a 1 MB media_type is refused naming the file');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "outputs": {"properties": {"a": {"$ref": "https://evil.example/s.json"}}}}')),
  'outputs.properties.a.\$ref: "https://evil.example/s.json" is not a reference inside the schema',
  'a remote $ref in outputs is refused');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "outputs": {"type": "objekt"}}')),
  'outputs.type: one of null, boolean, object', 'an outputs schema of an unknown type is refused');
select matches(tests.refusal(tests.script('{"version": "1.1.0", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)x"}}}}')),
  'parameters.properties.a.pattern: .* uses \(\?=: patterns must be regular expressions that need no backtracking',
  'a pattern with lookahead is refused saying patterns need no backtracking');

select tests.act_as_admin();
select public.publish_tool_version('{"tool_id": "rr_ns/rt", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0", "visibility": "private"}');
select tests.act_as('authenticated', tests.owner_id());
select matches(tests.refusal('{"tool_id": "rr_ns/on_rt", "tool_type": "script", "executor": "rr_ns/rt", "version": "1.0.0", "visibility": "public"}'),
  'visibility: a public tool \("rr_ns/on_rt"\) cannot run on a private executor \("rr_ns/rt"\)',
  'a public tool on a private runtime is refused naming both');
select is(tests.refusal('{"tool_id": "rr_ns/on_rt", "tool_type": "script", "executor": "rr_ns/rt", "version": "1.0.0", "visibility": "private"}'),
  'published', 'a private tool on it is published');

select * from finish();
rollback;
