-- Agents search with sentences. A tool is found when it has SOME of the query's words
-- (English stop words dropped, words stemmed), ranked by how well it matches: the more
-- of the words it has the higher, name before tags before description before
-- parameters; a word no tool has is read as its closest known spelling, and never as a
-- far one. Modifiers and RLS filter as before.
begin;
\ir ../_setup.sql
select plan(21);
select tests.make_acme();

-- the seeded tools, asked for the way a person asks
select is((select tool_id from search_tools('create pull request') limit 1), 'github_mcp',
  'create pull request: GitHub''s server first (it was nothing while every word had to match)');
select is((select tool_id from search_tools('send slack message') limit 1), 'slack_mcp',
  'send slack message: the Slack server first');
select is((select tool_id from search_tools('count words in text') limit 1), 'word_count',
  'count words in text: word_count first');
select is((select tool_id from search_tools('query postgres database') limit 1), 'postgres_mcp',
  'query postgres database: the PostgreSQL server first');
select is((select tool_id from search_tools('how do I count the words of a document?') limit 1), 'word_count',
  'stop words and punctuation are ignored');
select is((select tool_id from search_tools('counting word') limit 1), 'word_count', 'words are stemmed');
select is_empty($$ select * from search_tools('the of and') $$, 'a query of stop words only finds nothing');

-- more matching words rank above fewer, even against popularity
select public.publish_tool_version(
  '{"tool_id": "image_resizer", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Resizes an image to the given width."}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "image_viewer", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Shows an image."}', '[{"path": "a.sh", "content_text": "echo"}]');
update tools set run_count = 100000 where ref = 'image_viewer';
select is((select array_agg(tool_id) from search_tools('resize an image')), array['image_resizer', 'image_viewer'],
  'a tool with two of the words ranks above a far more used one with one of them');
select ok((select rank from search_tools('resize an image') limit 1)
          > (select rank from search_tools('resize an image') offset 1 limit 1), 'and its rank is higher, not tied');

-- parameters are searched, below the name
select public.publish_tool_version(
  '{"tool_id": "page_fetcher", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Downloads a page.",
    "parameters": [{"name": "timeout_seconds", "type": "integer", "description": "How long to wait for the quokkaserver."}]}',
  '[{"path": "a.sh", "content_text": "echo"}]');
select is((select tool_id from search_tools('quokkaserver') limit 1), 'page_fetcher',
  'a word of a parameter''s description finds the tool');
select ok(exists (select 1 from search_tools('timeout') where tool_id = 'page_fetcher'), 'so does a parameter''s name');

-- typos: the close word, never a far one
select ok(not exists (select 1 from search_tools('forcast') where tool_id = 'format_bytes'),
  'forcast is not read as format: format_bytes does not come up');
select public.publish_tool_version(
  '{"tool_id": "weather_forecast", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Tomorrow''s weather for a city."}', '[{"path": "a.sh", "content_text": "echo"}]');
select is((select tool_id from search_tools('forcast') limit 1), 'weather_forecast',
  'once a forecast tool exists, forcast finds it first');
select is((select tool_id from search_tools('weather forcast for paris') limit 1), 'weather_forecast',
  'a typo within a sentence too');

-- modifiers still filter the sentence
select results_eq($$ select tool_id from search_tools('type:mcp_server send slack message') $$,
  $$ values ('slack_mcp') $$, 'type: keeps only that type (http_echo, which sends a message, is an API tool)');
select ok(not exists (select 1 from search_tools('category:examples send slack message') where category <> 'examples'),
  'category: keeps only that category');
select results_eq($$ select tool_id from search_tools('namespace:acme public tool of acme') $$,
  $$ values ('acme/public_tool'), ('acme/private_tool') $$, 'namespace: keeps only that namespace');

-- a page of tools with every word is ranked alone, but only a page that passes the modifiers
select public.publish_tool_version(
  '{"tool_id": "quix_zorbl_maker", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
  '[{"path": "a.sh", "content_text": "echo"}]');
select tests.publish('quix_runner', 'runtime', 'subprocess');
select results_eq($$ select tool_id from search_tools('type:runtime quix zorbl', p_limit => 1) $$,
  $$ values ('quix_runner') $$, 'a filtered-out tool with every word does not hide one with some of them');

-- RLS still hides private tools from a sentence
select tests.act_as_user('stranger');
select is((select count(*)::int from search_tools('private tool of acme') where tool_id = 'acme/private_tool'), 0,
  'a stranger''s sentence never finds a private tool');
select tests.act_as_user('member');
select is((select tool_id from search_tools('private tool of acme') limit 1), 'acme/private_tool',
  'a member''s finds it first');
select tests.act_as_user('anon');
select is((select count(*)::int from search_tools('acme private tool') where tool_id like 'acme/private%'), 0,
  'nor does anon''s');

select * from finish();
rollback;
