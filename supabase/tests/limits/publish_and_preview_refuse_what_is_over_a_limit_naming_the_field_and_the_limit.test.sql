-- The registry's limits (public.registry_limits, 140_registry_limits.sql):
-- publish and preview refuse what is over one with 22023, naming the field, what it
-- holds and the limit; what is within them is published.
begin;
\ir ../_setup.sql
select plan(16);

insert into namespaces (namespace, owner_id) values ('limits_ns', tests.owner_id());

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[{"path": "run.sh", "content_text": "echo"}]',
                              p_yaml text default null) returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files, p_yaml);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.preview_refusal(p_manifest jsonb, p_files jsonb) returns text
  language plpgsql as $$
begin
  perform public.preview_execution_plan(p_manifest, p_files);
  return 'previewed';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

create function tests.script(p_more jsonb default '{}') returns jsonb language sql as $$
  select '{"tool_id": "limits_ns/t", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}'::jsonb || p_more
$$;

grant execute on all functions in schema tests to authenticated;
select tests.act_as('authenticated', tests.owner_id());

select matches(tests.refusal(tests.script(), jsonb_build_array(jsonb_build_object('path', 'run.sh', 'content_text', repeat('x', 1048577)))),
  'files\[1\] \("run.sh"\): 1048577 bytes, more than the limit of 1048576 \(registry_limits.file_bytes\)',
  'a file over 1 MiB is refused naming the file and the limit');
select matches(tests.refusal(tests.script('{"entrypoint": "f1.sh"}'),
                             (select jsonb_agg(jsonb_build_object('path', 'f' || i || '.sh', 'content_text', 'x'))
                                from generate_series(1, 501) i)),
  '^invalid manifest: files: 501 files, more than the limit of 500 \(registry_limits.files_per_version\)$',
  'more than 500 files are refused, and nothing else is read');
select matches(tests.refusal(tests.script('{"entrypoint": "f1.sh"}'),
                             (select jsonb_agg(jsonb_build_object('path', 'f' || i || '.sh', 'content_text', repeat('y', 1048576)))
                                from generate_series(1, 11) i)),
  'files: 11534336 bytes in all, more than the limit of 10485760 \(registry_limits.version_bytes\)',
  'more than 10 MiB in all is refused');
select matches(tests.refusal(tests.script(jsonb_build_object('tags', (select jsonb_agg(i::text) from generate_series(1, 51) i)))),
  'tags: 51 tags, more than the limit of 50 \(registry_limits.tags\)', 'more than 50 tags are refused');
select matches(tests.refusal(tests.script(jsonb_build_object('tags', jsonb_build_array('ok', repeat('t', 51))))),
  'tags\[2\]: 51 characters, more than the limit of 50 \(registry_limits.tag_chars\)', 'a tag over 50 characters is refused by its position');
select matches(tests.refusal(tests.script(jsonb_build_object('name', repeat('n', 201)))),
  'name: 201 characters, more than the limit of 200 \(registry_limits.text_field_chars.name\)', 'a long name is refused');
select matches(tests.refusal(tests.script(), p_yaml => repeat('#', 262145)),
  'manifest_yaml: 262145 bytes, more than the limit of 262144 \(registry_limits.manifest_yaml_bytes\)',
  'a tool.yaml over 256 KiB is refused');
select matches(tests.refusal(tests.script(jsonb_build_object('metadata', jsonb_build_object('blob', repeat('m', 262144))))),
  'manifest: \d+ bytes as JSON, more than the limit of 262144 \(registry_limits.manifest_bytes\)',
  'a manifest over 256 KiB as JSON is refused');
select matches(tests.refusal(tests.script('{"entrypoint": "run.sh"}'),
                             '[{"path": "run.sh", "content_text": "echo"}, {"path": "x", "content_text": "a"}, {"path": "x/y", "content_text": "b"}]'),
  'files\[2\]\.path: "x" is a file, but "x/y" needs it to be a directory', 'a file cannot also be another''s directory');
select matches(tests.refusal(tests.script('{"entrypoint": "run.sh"}'),
                             jsonb_build_array('{"path": "run.sh", "content_text": "echo"}'::jsonb,
                                               jsonb_build_object('path', repeat('s', 256), 'content_text', 'x'))),
  'files\[2\]\.path: the name "s+…" is 256 bytes, more than the limit of 255 \(registry_limits.path_segment_bytes\)',
  'a name over 255 bytes is refused');
select matches(tests.refusal(tests.script('{"entrypoint": "run.sh"}'),
                             '[{"path": "run.sh", "content_text": "echo"}, {"path": ".kiwi-complete", "content_text": "x"}]'),
  'files\[2\]\.path: ".kiwi-complete" is a reserved name \(registry_limits.reserved_names', 'the runner''s marker is reserved');
select matches(tests.refusal(tests.script('{"entrypoint": "run.sh"}'),
                             '[{"path": "run.sh", "content_text": "echo"}, {"path": "lib/.kiwi-env", "content_text": "x"}]'),
  'files\[2\]\.path: ".kiwi-env" starts with a reserved prefix \(registry_limits.reserved_segment_prefixes', 'names starting with .kiwi are reserved');
select matches(tests.refusal(tests.script(), '[{"path": "run.sh", "content_text": 5}]'),
  'files\[1\]\.content_text: must be a JSON string, not number \(registry_limits.file_field_types\)',
  'content_text must be a string, not a number stored as text');
select matches(tests.preview_refusal(tests.script(), '[{"path": "run.sh", "content_text": 5}]'),
  'files\[1\]\.content_text: must be a JSON string, not number',
  'preview refuses the same as publish');
select is(tests.refusal(tests.script(jsonb_build_object('entrypoint', 'run.sh', 'tags', (select jsonb_agg(repeat('t', 50)) from generate_series(1, 50)))),
                        jsonb_build_array('{"path": "run.sh", "content_text": "echo"}'::jsonb,
                                          jsonb_build_object('path', 'dir/' || repeat('é', 127) || 's', 'content_text', repeat('x', 1048576))),
                        repeat('#', 262144)),
  'published', 'what is just within every limit is published');

select tests.act_as_admin();
update registry_limits set value = '60' where name = 'tags';
select tests.act_as('authenticated', tests.owner_id());
select is(tests.refusal(tests.script(jsonb_build_object('version', '1.0.1', 'tags', (select jsonb_agg(i::text) from generate_series(1, 60) i)))),
  'published', 'a limit changed in the table applies at once');

select * from finish();
rollback;
