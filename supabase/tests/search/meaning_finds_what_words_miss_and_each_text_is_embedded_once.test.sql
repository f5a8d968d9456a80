-- Semantic search: each tool's searchable text is embedded once per model (keyed by the
-- text's sha256), stored only by those who may (the namespace's members, service_role),
-- and search_tools fuses the nearest vectors with its lexical ranking when its caller
-- passes the query's vector; without one it answers lexically and says why. Vectors here
-- are made by hand (unit vectors), so the test needs no model.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(33);
select tests.make_acme();

-- a 256-number vector pointing mostly along axis i (and a little along j)
create function tests.vec(i int, j int default null, w real default 0) returns real[]
  language sql immutable as $$
  select array_agg(case when k = i then 1 when k = j then w else 0 end::real order by k)
    from generate_series(1, 256) k
$$;
create function tests.items(p_hash text, p_vec real[]) returns jsonb
  language sql immutable as $$
  select jsonb_build_array(jsonb_build_object('text_hash', p_hash, 'embedding', to_jsonb(p_vec)))
$$;
create function tests.hash_of(p_ref text) returns text
  language sql stable security definer as $$
  select search_text_hash from public.tools where ref = p_ref
$$;
grant execute on all functions in schema tests to anon, authenticated, service_role;

select public.publish_tool_version(
  '{"tool_id": "umbrella_advisor", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "Tells you whether to take an umbrella"}', '[{"path": "a.sh", "content_text": "echo"}]');
select public.publish_tool_version(
  '{"tool_id": "acme/secret_sky_oracle", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "visibility": "private", "description": "Private forecasts"}', '[{"path": "a.sh", "content_text": "echo"}]');

select ok((select search_text from public.tools where ref = 'umbrella_advisor') like 'umbrella advisor. Tells you whether to take an umbrella%',
  'a tool''s searchable text starts with its name as words and its description');

select tests.act_as_user('service_role');
select ok(exists (select 1 from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('umbrella_advisor')),
  'a new tool''s text is pending for a model');
select is((select count(*)::int from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('umbrella_advisor')), 1,
  'each text is pending once');

select tests.act_as_user('stranger');
select throws_ok(format($$select store_search_embeddings('m1', %L)$$, tests.items(tests.hash_of('acme/secret_sky_oracle'), tests.vec(1))),
  '42501', null, 'a stranger may not store the vector of another namespace''s tool');
select is_empty($$select * from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('acme/secret_sky_oracle')$$,
  'nor is another namespace''s text pending for a stranger');

select tests.act_as_user('member');
select is(store_search_embeddings('m1', tests.items(tests.hash_of('acme/secret_sky_oracle'), tests.vec(1, 2, 0.5))), 1,
  'a member stores the vector of its namespace''s tool');
select throws_ok(format($$select store_search_embeddings('m1', %L)$$,
                        jsonb_build_array(jsonb_build_object('text_hash', tests.hash_of('acme/secret_sky_oracle'),
                                                             'embedding', to_jsonb((tests.vec(1))[1:255])))),
  '22023', null, 'a vector of 255 numbers is refused');
select throws_ok(format($$select store_search_embeddings('m1', %L)$$,
                        tests.items(tests.hash_of('acme/secret_sky_oracle'), array_fill(0::real, array[256]))),
  '22023', null, 'an all-zero vector is refused: its cosine similarity to anything is NaN');
select is(store_search_embeddings('m1', tests.items(tests.hash_of('acme/secret_sky_oracle'), tests.vec(3))), 0,
  'a member''s stored vector is kept: a second one replaces nothing');

select tests.act_as_user('service_role');
select is(store_search_embeddings('m1', tests.items(tests.hash_of('umbrella_advisor'), tests.vec(1, 3, 0.2))), 1,
  'service_role stores any tool''s vector');
select is_empty($$select * from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('umbrella_advisor')$$,
  'a stored text is no longer pending');

select tests.act_as_user('anon');
select is_empty($$select * from search_tools('will it rain')$$, 'the words of "will it rain" find nothing');
select is((select array[tool_id, matched_by, search_mode] from search_tools('will it rain', null, null, 5, tests.vec(1), 'm1') limit 1),
  array['umbrella_advisor', 'meaning', 'hybrid'], 'the query''s vector finds the tool nearest in meaning');
select is_empty($$select * from search_tools('will it rain', null, null, 5, tests.vec(1), 'm1') where tool_id like 'acme/%'$$,
  'anon never finds a private tool by meaning');
select is((select search_mode from search_tools('umbrella', null, null, 5) limit 1), 'lexical: no query embedding given',
  'without a vector the answer is lexical and says so');
select is((select search_mode from search_tools('umbrella', null, null, 5, tests.vec(1), 'no_such_model') limit 1),
  'lexical: no tool embeddings stored for model no_such_model (kiwi embed stores them)',
  'with a model nothing was embedded with, it says that');
select is((select matched_by from search_tools('umbrella', null, null, 5, tests.vec(1), 'm1') limit 1), 'words+meaning',
  'a tool found both ways says so');
select throws_ok($$select * from search_tools('umbrella', null, null, 5, array[1, 2]::real[], 'm1')$$, '22023',
  'search_tools: p_embedding must be 256 numbers (got 2)', 'a query vector of the wrong size is refused, saying its size');

select throws_ok($$select * from search_tools('umbrella', null, null, 5, array_fill(0::real, array[256]), 'm1')$$, '22023',
  'search_tools: p_embedding is all zeros, which has no direction to search in',
  'an all-zero query vector is refused (it would find every tool)');

select throws_ok($$select * from search_tools('umbrella', null, null, 5, array_fill('NaN'::real, array[256]), 'm1')$$, '22023',
  'search_tools: p_embedding must be finite numbers (it holds NaN or infinity)', 'a query vector holding NaN is refused');
select throws_like($$select * from search_tools((select string_agg('word' || i, ' ') from generate_series(1, 65) i))$$,
  'search_tools: a query has at most 64 different words and 2000 characters (this one: 65 words%',
  'a query of a document''s length is refused, naming the limits (each word costs index probes)');

select tests.act_as_user('member');
select is((select array_agg(tool_id order by tool_id) from search_tools('will it rain', null, null, 5, tests.vec(1), 'm1')),
  array['acme/secret_sky_oracle', 'umbrella_advisor'], 'a member finds its namespace''s private tool by meaning too');
select is((select count(*)::int from search_tools('will it rain', 'mcp_tool', null, 5, tests.vec(1), 'm1')), 0,
  'modifiers filter what meaning finds');

-- a new version with the same searchable text keeps its vector; a new description needs one
select tests.act_as_user('service_role');
select public.publish_tool_version(
  '{"tool_id": "umbrella_advisor", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.1",
    "description": "Tells you whether to take an umbrella"}', '[{"path": "a.sh", "content_text": "echo 2"}]');
select is_empty($$select * from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('umbrella_advisor')$$,
  'a version whose searchable text did not change is not embedded again');
select public.publish_tool_version(
  '{"tool_id": "umbrella_advisor", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0",
    "description": "Tells you whether to take an umbrella or sunglasses"}', '[{"path": "a.sh", "content_text": "echo 3"}]');
select ok(exists (select 1 from pending_search_texts('m1', 1000) where text_hash = tests.hash_of('umbrella_advisor')),
  'a version whose text changed is pending again');
select is(store_search_embeddings('m1', tests.items(tests.hash_of('acme/secret_sky_oracle'), tests.vec(4))), 1,
  'service_role replaces a stored vector');
select ok(exists (select 1 from pending_search_texts('m1', 1000, null, true) where text_hash = tests.hash_of('acme/secret_sky_oracle')),
  'service_role lists every text with p_all, embedded or not (to refresh the vectors)');
select is((select count(*)::int from pending_search_texts('m1', 1000, tests.hash_of('acme/secret_sky_oracle'), true)
            where text_hash <= tests.hash_of('acme/secret_sky_oracle')), 0,
  'p_after pages on in hash order');

select tests.act_as_user('member');
select throws_ok($$select * from pending_search_texts('m1', 10, null, true)$$, '42501', null,
  'a member may not list every text: its first stored vector stays');

-- a modifier: when the words fill the lexical list (50 tools with the words and the
-- modifier), meaning scores those tools by their own vectors instead of walking the index
-- for 50 of that kind; when they do not, the index is walked and meaning finds what words miss
select tests.act_as_user('service_role');
select public.publish_tool_version(
  jsonb_build_object('tool_id', 'gauge_' || i, 'tool_type', 'script', 'executor', 'bash_runtime', 'version', '1.0.0',
                     'description', 'Reads rain gauge number ' || i),
  '[{"path": "a.sh", "content_text": "echo"}]')
  from generate_series(1, 55) i;
select is(store_search_embeddings('m1', (select jsonb_agg(jsonb_build_object('text_hash', t.search_text_hash,
                                                                             'embedding', to_jsonb(tests.vec(1, 5, (i % 7 + 1)::real))))
                                           from public.tools t, generate_series(1, 55) i where t.ref = 'gauge_' || i)),
  55, 'the gauges'' vectors are stored (each a little further from axis 1 than the one before, by sevens)');
select tests.act_as_user('anon');
select is((select array_agg(matched_by order by rank desc, tool_id) from search_tools('type:script gauge', null, null, 20, tests.vec(1), 'm1')),
          array_fill('words+meaning'::text, array[20]),
  'with a modifier and words that fill the list, each tool the words found is ranked by its own vector too');
select is((select tool_id from search_tools('type:script gauge', null, null, 1, tests.vec(1), 'm1')),
          (select tool_id from search_tools('type:script gauge', null, null, 20, tests.vec(1), 'm1') where tool_id in ('gauge_7', 'gauge_14', 'gauge_21', 'gauge_28', 'gauge_35', 'gauge_42', 'gauge_49') order by rank desc, tool_id limit 1),
  'and the nearest of them in meaning comes first');
select is((select array[tool_id, matched_by] from search_tools('type:script will it be wet', null, null, 5, tests.vec(1), 'm1') limit 1),
  array['gauge_14', 'meaning'],
  'with a modifier and words that find nothing, meaning still finds the nearest tools (the gauges nearest axis 1, by id)');

select * from finish();
rollback;
