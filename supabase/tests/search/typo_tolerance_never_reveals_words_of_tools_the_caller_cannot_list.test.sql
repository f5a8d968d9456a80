-- Search corrects typos against the registry's vocabulary, which holds the words of every
-- tool's id, name, tags and category, private and unlisted tools included. A correction is
-- an answer too: it must never be a word the caller could not have found, so a word is
-- offered only while a tool the caller may list (public; private ones of the caller's
-- namespaces; every one for admins; never an unlisted one) carries it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(11);
select tests.make_acme();

select public.publish_tool_version(
  '{"tool_id": "acme/quokkaphone_secret", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "private", "tags": ["marsupialtron"]}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "acme/wallabyscope_hidden", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "unlisted"}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "wombatastic_counter", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
  '[{"path": "a.sh", "content_text": "echo"}]');

select tests.act_as_user('anon');
select is(kiwi_internal.similar_search_words('quokaphone'), '{}'::text[],
  'anon is offered no word of a private tool''s id');
select is(kiwi_internal.similar_search_words('marsupialtrom'), '{}'::text[], 'nor of its tags');
select is(kiwi_internal.similar_search_words('walabyscope'), '{}'::text[], 'nor of an unlisted tool''s id');
-- Other tests may have left public tools whose words a typo corrects to, so only the
-- private namespace's tools are asserted absent.
select is_empty($$select * from search_tools('quokaphone secrit') where namespace = 'acme'$$,
  'anon''s misspelt search finds nothing private');
select is(kiwi_internal.similar_search_words('wombatastik'), array['wombatastic'],
  'typo tolerance keeps working for public tools');
select is((select tool_id from search_tools('wombatastik countr') limit 1), 'wombatastic_counter',
  'so a misspelt query finds a public tool');

select tests.act_as_user('stranger');
select is(kiwi_internal.similar_search_words('quokaphone'), '{}'::text[],
  'a signed-in stranger is offered no word of acme''s private tool either');

select tests.act_as_user('member');
select is(kiwi_internal.similar_search_words('quokaphone'), array['quokkaphone'],
  'a member of acme is offered the private tool''s words');
select is((select tool_id from search_tools('quokaphone') limit 1), 'acme/quokkaphone_secret',
  'and finds the private tool through a typo');
select is(kiwi_internal.similar_search_words('walabyscope'), '{}'::text[],
  'an unlisted tool''s words are offered to nobody: search never lists it');

select tests.act_as_admin();
select is(kiwi_internal.similar_search_words('quokaphone'), array['quokkaphone'], 'an admin is offered every listable word');

select * from finish();
rollback;
