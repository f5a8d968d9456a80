-- Search weighs a query's words by how many public tools hold them (BM25's idf). The
-- counts follow every write of a tool (publish, a change of visibility, a delete), count
-- only public tools with a version (a private or unlisted tool's words are never
-- counted, so no caller learns their frequency), move nothing on a run, and equal a
-- recount from scratch. Beside them, the words any tool has (any_tools, which search uses
-- only to turn a prefix into whole words) follow every tool, private and unlisted ones too.
begin;
\ir ../_setup.sql
select plan(13);
select tests.make_acme();

create function tests.tools_with(p_lexeme text) returns int language sql as $$
  select coalesce((select c.tools from kiwi_internal.search_term_counts c where c.lexeme = p_lexeme), 0)
$$;
create function tests.any_tools_with(p_lexeme text) returns int language sql as $$
  select coalesce((select c.any_tools from kiwi_internal.search_term_counts c where c.lexeme = p_lexeme), 0)
$$;

select public.publish_tool_version(
  '{"tool_id": "wombatizer", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "public", "description": "Wombatizes a quokkafile."}', '[{"path": "a.sh", "content_text": "echo"}]');
select is(tests.tools_with('wombat'), 1, 'a public tool''s words are counted when it is published');

select public.publish_tool_version(
  '{"tool_id": "wombat_secret", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "private", "description": "Wombatizes privately."}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "wombat_hidden", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "unlisted", "description": "Wombatizes quietly."}', '[{"path": "a.sh", "content_text": "echo"}]');
select is(tests.tools_with('wombat'), 1, 'a private or an unlisted tool''s words are not');
select is(tests.tools_with('privat'), 0, 'not even a word only the private tool has');
select is(array[tests.any_tools_with('wombat'), tests.any_tools_with('quokkafil')], array[3, 1],
  'every tool''s words are known to exist, private and unlisted ones too');

update public.tools set run_count = run_count + 5, download_count = download_count + 1 where tool_id = 'wombatizer';
select is(tests.tools_with('wombat'), 1, 'a run or a download moves no count');

update public.tools set visibility = 'public' where tool_id = 'wombat_secret';
select is(tests.tools_with('wombat'), 2, 'a tool made public is counted');
update public.tools set visibility = 'private' where tool_id = 'wombatizer';
select is(tests.tools_with('quokkafil'), 0, 'a tool made private is taken away');

select public.publish_tool_version(
  '{"tool_id": "wombat_secret", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0",
    "visibility": "public", "description": "Numbatizes now."}', '[{"path": "a.sh", "content_text": "echo"}]');
select is(array[tests.tools_with('privat'), tests.tools_with('numbat')], array[0, 1],
  'a new version''s description replaces its old words');

select is(array[tests.any_tools_with('wombat'), tests.any_tools_with('numbat')], array[3, 1],
  'and whatever their versions say');

delete from public.tools where tool_id = 'wombat_secret';
select is(array[tests.tools_with('numbat'), tests.any_tools_with('numbat')], array[0, 0],
  'a deleted tool''s words are taken away');

create temp table kept as
  select lexeme, tools, any_tools from kiwi_internal.search_term_counts where tools <> 0 or any_tools <> 0;
select kiwi_internal.recount_search_terms();
select set_eq($$ select lexeme, tools, any_tools from kiwi_internal.search_term_counts $$,
  $$ select lexeme, tools, any_tools from kept $$,
  'the counts the trigger kept equal a recount from scratch');

-- search reads a prefix as the words that start with it: a word only a private tool has
-- (wombatizer's quokkafile) is still found by its prefix by those who may list the tool
select is((select array_agg(s.tool_id) from public.search_tools('quokka') s), array['wombatizer'],
  'a prefix of a private tool''s word finds it for a caller who may list it');
select tests.act_as('anon');
select is((select count(*) from public.search_tools('quokka') s), 0::bigint, 'and for no one else');
select tests.act_as_admin();

select * from finish();
rollback;
