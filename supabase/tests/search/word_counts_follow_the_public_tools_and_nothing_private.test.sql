-- Search weighs a query's words by how many public tools hold them (BM25's idf). The
-- counts follow every write of a tool (publish, a change of visibility, a delete), count
-- only public tools with a version (a private or unlisted tool's words are never
-- counted, so no caller learns their frequency), move nothing on a run, and equal a
-- recount from scratch.
begin;
\ir ../_setup.sql
select plan(9);
select tests.make_acme();

create function tests.tools_with(p_lexeme text) returns int language sql as $$
  select coalesce((select c.tools from kiwi_internal.search_term_counts c where c.lexeme = p_lexeme), 0)
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

delete from public.tools where tool_id = 'wombat_secret';
select is(tests.tools_with('numbat'), 0, 'a deleted tool''s words are taken away');

create temp table kept as select lexeme, tools from kiwi_internal.search_term_counts where tools <> 0;
select kiwi_internal.recount_search_terms();
select set_eq($$ select lexeme, tools from kiwi_internal.search_term_counts $$, $$ select lexeme, tools from kept $$,
  'the counts the trigger kept equal a recount from scratch');

select * from finish();
rollback;
