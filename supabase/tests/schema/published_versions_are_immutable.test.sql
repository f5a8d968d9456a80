begin;
\ir ../_setup.sql
select plan(9);

create temporary table hw on commit drop as
select v.id from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'hello_world';

select throws_ok($$ update tool_versions set manifest = manifest || '{"description": "changed"}' where id = (select id from hw) $$,
  '23514', 'published version 1.0.0 is immutable: only deprecation and yanking may change',
  'a published manifest cannot change, even for an admin');
select throws_ok($$ update tool_versions set content_hash = repeat('0', 64) where id = (select id from hw) $$,
  '23514', null, 'a published content_hash cannot change');
select throws_ok($$ delete from tool_versions where id = (select id from hw) $$,
  '23514', 'published version 1.0.0 cannot be deleted', 'a published version cannot be deleted');
select throws_ok($$ update tool_version_files set content_text = 'rm -rf ~' where version_id = (select id from hw) $$,
  '23514', 'file "hello.sh" of a published version is immutable', 'a published file cannot change');
select throws_ok($$ delete from tool_version_files where version_id = (select id from hw) $$,
  '23514', 'file "hello.sh" of a published version cannot be deleted', 'a published file cannot be deleted');

select lives_ok($$ select deprecate_tool_version('hello_world', '1.0.0', 'use hello_world 2') $$, 'deprecation is allowed');
select is((select is_deprecated from tool_versions where id = (select id from hw)), true, 'and recorded');
select lives_ok($$ update tool_versions set is_yanked = true, yanked_reason = 'test' where id = (select id from hw) $$,
  'yanking is allowed');

select tests.publish('whole', 'runtime', 'subprocess', '1.0.0');
select tests.publish('whole', 'runtime', 'subprocess', '1.1.0');
select delete_tool('whole');
select is((select count(*)::int from tool_versions v where not exists (select 1 from tools t where t.id = v.tool_uuid)),
  0, 'removing a whole tool takes its versions with it');

select * from finish();
rollback;
