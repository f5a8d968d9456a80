begin;
\ir ../_setup.sql
select plan(5);

create temporary table before_counts on commit drop as
select (select count(*) from tools) as tools, (select count(*) from tool_versions) as versions,
       (select count(*) from tool_version_files) as files,
       (select latest_version from tools where ref = 'hello_world') as hello_latest;

-- refused after the rows were written: an api that does not end in http_client
select throws_ok($$ select public.publish_tool_version(
    '{"tool_id": "late_failure", "tool_type": "api", "executor": "subprocess", "version": "1.0.0"}',
    '[{"path": "spec.json", "content_text": "{}"}]') $$,
  'PT422', null, 'a publish refused after its rows were written');
-- refused after a new version of an existing tool was written
select throws_ok($$ select public.publish_tool_version(
    '{"tool_id": "hello_world", "tool_type": "script", "executor": "no_such", "version": "9.0.0"}',
    '[{"path": "hello.sh", "content_text": "echo"}]') $$,
  'PT404', null, 'a new version refused for its executor');

select is((select count(*) from tools), (select tools from before_counts), 'no tool was added');
select is((select count(*) from tool_versions) + (select count(*) from tool_version_files),
          (select versions + files from before_counts), 'no version or file was added');
select is((select latest_version from tools where ref = 'hello_world'), (select hello_latest from before_counts),
          'latest did not move');

select * from finish();
rollback;
