-- An unlisted tool is a link shared by hand: anyone who knows its exact reference
-- resolves it and gets its plan, but non-members never see it in a table, and search
-- never lists it, for anyone.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(33);
select tests.make_acme();

-- tables: hidden from non-members, visible to members and admins
select tests.act_as_user('anon');
select is((select count(*)::int from tools where ref = 'acme/unlisted_tool'), 0, 'anon does not see the unlisted tool in tools');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/unlisted_tool'), 0,
  'anon does not see the unlisted tool''s versions');
select is((select count(*)::int from tool_version_files where content_text = 'echo unlisted'), 0,
  'anon does not see the unlisted tool''s files');
select tests.act_as_user('stranger');
select is((select count(*)::int from tools where ref = 'acme/unlisted_tool'), 0, 'a stranger does not see the unlisted tool in tools');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/unlisted_tool'), 0,
  'a stranger does not see the unlisted tool''s versions');
select is((select count(*)::int from tool_version_files where content_text = 'echo unlisted'), 0,
  'a stranger does not see the unlisted tool''s files');
select tests.act_as_user('member');
select is((select count(*)::int from tools where ref = 'acme/unlisted_tool'), 1, 'a member sees the unlisted tool in tools');
select tests.act_as_user('owner');
select is((select count(*)::int from tools where ref = 'acme/unlisted_tool'), 1, 'the owner sees the unlisted tool in tools');

-- resolve by exact reference: everyone
select tests.act_as_user('anon');
select results_eq($$select depth, tool_id from resolve_executor_chain('acme/unlisted_tool')$$,
  $$values (0, 'acme/unlisted_tool'), (1, 'bash_runtime'), (2, 'subprocess')$$,
  'anon resolves the unlisted tool''s chain by its exact reference');
select is(resolve_execution_plan('acme/unlisted_tool') ->> 'tool_id', 'acme/unlisted_tool',
  'anon gets the unlisted tool''s execution plan');
select is(resolve_execution_plan('acme/unlisted_tool') #>> '{files,0,content_text}', 'echo unlisted',
  'anon''s plan of the unlisted tool carries its file');
select results_eq($$select requested_tool_id, depth, error from resolve_executor_chains_batch(array['acme/unlisted_tool']) where depth = 0 or depth is null$$,
  $$values ('acme/unlisted_tool', 0, null::text)$$,
  'anon resolves the unlisted tool in a batch');
select tests.act_as_user('stranger');
select results_eq($$select tool_id from resolve_executor_chain('acme/unlisted_tool') order by depth$$,
  $$values ('acme/unlisted_tool'), ('bash_runtime'), ('subprocess')$$,
  'a stranger resolves the unlisted tool by its exact reference');
select is(resolve_execution_plan('acme/unlisted_tool') ->> 'version', '1.0.0',
  'a stranger gets the unlisted tool''s execution plan');
select is(resolve_execution_plan('acme/unlisted_tool', '1.0.0') ->> 'tool_id', 'acme/unlisted_tool',
  'a stranger gets the unlisted tool''s plan by exact version too');
select tests.act_as_user('member');
select is((select count(*)::int from resolve_executor_chain('acme/unlisted_tool')), 3,
  'a member resolves the unlisted tool');
select tests.act_as_user('owner');
select is(resolve_execution_plan('acme/unlisted_tool') ->> 'primitive', 'subprocess',
  'the owner gets the unlisted tool''s plan');
select tests.act_as_user('service_role');
select is((select count(*)::int from resolve_executor_chain('acme/unlisted_tool')), 3,
  'service_role resolves the unlisted tool');

-- search: never, whoever asks, however they ask
select tests.act_as_user('anon');
select is_empty($$select tool_id from search_tools('acme unlisted') where tool_id = 'acme/unlisted_tool'$$,
  'anon''s search never lists the unlisted tool');
select is_empty($$select tool_id from search_tools('acme/unlisted_tool') where tool_id = 'acme/unlisted_tool'$$,
  'anon''s search by the exact reference does not list it either');
select tests.act_as_user('stranger');
select is_empty($$select tool_id from search_tools('unlisted_tool') where tool_id = 'acme/unlisted_tool'$$,
  'a stranger''s search never lists the unlisted tool');
select tests.act_as_user('member');
select results_eq($$select tool_id from search_tools('acme') order by 1$$,
  $$values ('acme/private_tool'), ('acme/public_tool')$$,
  'a member''s search lists acme''s public and private tools, not the unlisted one');
select tests.act_as_user('owner');
select results_eq($$select tool_id from search_tools('namespace:acme') order by 1$$,
  $$values ('acme/private_tool'), ('acme/public_tool')$$,
  'the owner''s listing of acme leaves the unlisted tool out');
select is_empty($$select tool_id from search_tools('unlisted', 'script') where tool_id = 'acme/unlisted_tool'$$,
  'the owner''s search by type does not list the unlisted tool');
select tests.act_as_user('service_role');
select is_empty($$select tool_id from search_tools('acme unlisted') where tool_id = 'acme/unlisted_tool'$$,
  'service_role''s search never lists the unlisted tool');
select is_empty($$select tool_id from search_tools('') where tool_id = 'acme/unlisted_tool'$$,
  'service_role''s listing by popularity leaves the unlisted tool out');
select tests.act_as_admin();
select is_empty($$select tool_id from search_tools('namespace:acme unlisted') where tool_id = 'acme/unlisted_tool'$$,
  'postgres''s search never lists the unlisted tool');

-- views follow the tables
select tests.act_as_user('stranger');
select is_empty($$select tool_id from tool_catalog where tool_id = 'acme/unlisted_tool'$$,
  'a stranger''s tool_catalog leaves the unlisted tool out');
select tests.act_as_user('member');
select results_eq($$select tool_id, visibility from tool_catalog where tool_id = 'acme/unlisted_tool'$$,
  $$values ('acme/unlisted_tool', 'unlisted')$$, 'a member''s tool_catalog lists the unlisted tool');
select tests.act_as_user('anon');
select is_empty($$select tool_id from tool_version_history where tool_id = 'acme/unlisted_tool'$$,
  'anon''s tool_version_history leaves the unlisted tool out');

-- every read by exact reference follows the same rule (the edge function's load, kiwi pull,
-- trust verification): what resolves, loads and attests in full
select tests.act_as_user('anon');
select is(tool_version_source('acme/unlisted_tool') #>> '{files,0,content_text}', 'echo unlisted',
  'anon reads the unlisted tool''s source by its exact reference');
select is((select namespace from resolve_chain_attestations('acme/unlisted_tool') where depth = 0), 'acme',
  'its attestation names its namespace, as for a listed tool');
select is((select jsonb_array_length(files) from resolve_chain_attestations('acme/unlisted_tool') where depth = 0), 1,
  'and lists its files, so a client can recompute its content_hash');

select * from finish();
rollback;
