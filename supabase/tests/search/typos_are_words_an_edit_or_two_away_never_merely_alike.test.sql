-- A word no tool has is read as a typo of a known word only when a letter or two was
-- added, dropped, changed or swapped (the fewest edits win): `serach` is search and
-- `forcast` is forecast, but `picture` is not `pick` and `dentist` is not `deno`, however
-- many trigrams they share.
begin;
\ir ../_setup.sql
select plan(9);

select is(kiwi_internal.edit_distance('serach', 'search'), 1, 'two neighbours swapped are one edit');
select is(kiwi_internal.edit_distance('kitten', 'sitting'), 3, 'kitten to sitting is three edits');
select is(kiwi_internal.edit_distance('', 'abc'), 3, 'an empty word is as many edits as the other''s letters');
select is(kiwi_internal.edit_distance('forcast', 'format'), 2, 'forcast to format is two edits');

select public.publish_tool_version(
  '{"tool_id": "cherry_pick", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "public", "description": "Applies one commit onto a branch."}',
  '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "quokka_search", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "public", "description": "Finds quokkas."}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "quokka_forecast", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "public", "description": "Tomorrow''s quokka weather."}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "quokka_format", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "public", "description": "Formats quokkas."}', '[{"path": "a.sh", "content_text": "echo"}]');

select ok(not exists (select 1 from search_tools('picture') where tool_id = 'cherry_pick'),
  'picture is not read as pick (alike in trigrams, four edits away)');
select is((select tool_id from search_tools('serach quokka') limit 1), 'quokka_search', 'serach is read as search');
select is((select tool_id from search_tools('quokka forcast') limit 1), 'quokka_forecast', 'forcast is read as forecast');
select ok(not exists (select 1 from search_tools('forcast') where tool_id = 'quokka_format'),
  'and not also as format, which is two edits away where forecast is one');
select is(kiwi_internal.similar_search_words('forcast'), array['forecast'], 'only the fewest edits are offered');

select * from finish();
rollback;
