-- A private tool exists only for the members of its namespace (owner and member) and
-- for admins (service_role, postgres): in the tables, in resolution and plans, in
-- search and in the catalogue views. Everyone else is told it is not found.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(38);
select tests.make_acme();

-- tables
select tests.act_as_user('anon');
select is((select count(*)::int from tools where ref = 'acme/private_tool'), 0, 'anon does not see the private tool');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/private_tool'), 0,
  'anon does not see the private tool''s versions');
select is((select count(*)::int from tool_version_files where content_text = 'echo private'), 0,
  'anon does not see the private tool''s files');
select tests.act_as_user('stranger');
select is((select count(*)::int from tools where ref = 'acme/private_tool'), 0, 'a stranger does not see the private tool');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/private_tool'), 0,
  'a stranger does not see the private tool''s versions');
select is((select count(*)::int from tool_version_files where content_text = 'echo private'), 0,
  'a stranger does not see the private tool''s files');
select tests.act_as_user('owner');
select results_eq($$select t.ref, v.version, f.content_text
                      from tools t join tool_versions v on v.tool_uuid = t.id join tool_version_files f on f.version_id = v.id
                     where t.ref = 'acme/private_tool'$$,
  $$values ('acme/private_tool', '1.0.0', 'echo private')$$, 'the owner reads the private tool, its version and its file');
select tests.act_as_user('member');
select results_eq($$select t.ref, v.version, f.content_text
                      from tools t join tool_versions v on v.tool_uuid = t.id join tool_version_files f on f.version_id = v.id
                     where t.ref = 'acme/private_tool'$$,
  $$values ('acme/private_tool', '1.0.0', 'echo private')$$, 'a member reads the private tool, its version and its file');
select tests.act_as_user('service_role');
select results_eq($$select t.ref, v.version, f.content_text
                      from tools t join tool_versions v on v.tool_uuid = t.id join tool_version_files f on f.version_id = v.id
                     where t.ref = 'acme/private_tool'$$,
  $$values ('acme/private_tool', '1.0.0', 'echo private')$$, 'service_role reads the private tool, its version and its file');

-- resolve_executor_chain
select tests.act_as_user('anon');
select throws_ok($$select * from resolve_executor_chain('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'anon is told the private tool is not found');
select tests.act_as_user('stranger');
select throws_ok($$select * from resolve_executor_chain('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger is told the private tool is not found');
select tests.act_as_user('owner');
select results_eq($$select tool_id from resolve_executor_chain('acme/private_tool') order by depth$$,
  $$values ('acme/private_tool'), ('bash_runtime'), ('subprocess')$$, 'the owner resolves the private tool');
select tests.act_as_user('member');
select results_eq($$select tool_id from resolve_executor_chain('acme/private_tool') order by depth$$,
  $$values ('acme/private_tool'), ('bash_runtime'), ('subprocess')$$, 'a member resolves the private tool');
select tests.act_as_user('service_role');
select results_eq($$select tool_id from resolve_executor_chain('acme/private_tool') order by depth$$,
  $$values ('acme/private_tool'), ('bash_runtime'), ('subprocess')$$, 'service_role resolves the private tool');
select tests.act_as_admin();
select results_eq($$select tool_id from resolve_executor_chain('acme/private_tool') order by depth$$,
  $$values ('acme/private_tool'), ('bash_runtime'), ('subprocess')$$, 'postgres resolves the private tool');

-- resolve_execution_plan (by latest and by exact version)
select tests.act_as_user('anon');
select throws_ok($$select resolve_execution_plan('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'anon gets no plan for the private tool');
select throws_ok($$select resolve_execution_plan('acme/private_tool', '1.0.0')$$,
  'PT404', 'tool "acme/private_tool" not found', 'anon gets no plan for the private tool''s exact version');
select tests.act_as_user('stranger');
select throws_ok($$select resolve_execution_plan('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger gets no plan for the private tool');
select throws_ok($$select resolve_execution_plan('acme/private_tool', '1.0.0')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger gets no plan for the private tool''s exact version');
select tests.act_as_user('owner');
select is(resolve_execution_plan('acme/private_tool') #>> '{files,0,content_text}', 'echo private',
  'the owner gets the private tool''s plan with its file');
select tests.act_as_user('member');
select is(resolve_execution_plan('acme/private_tool', '1.0.0') ->> 'tool_id', 'acme/private_tool',
  'a member gets the private tool''s plan by exact version');
select tests.act_as_user('service_role');
select is(resolve_execution_plan('acme/private_tool') ->> 'primitive', 'subprocess',
  'service_role gets the private tool''s plan');
select tests.act_as_admin();
select is(resolve_execution_plan('acme/private_tool') ->> 'version', '1.0.0', 'postgres gets the private tool''s plan');

-- batch: one error row for those who may not see it, without failing the others
select tests.act_as_user('stranger');
select results_eq($$select requested_tool_id, error from resolve_executor_chains_batch(array['acme/private_tool', 'acme/public_tool'])
                     where depth is null or depth = 0 order by 1$$,
  $$values ('acme/private_tool', 'tool "acme/private_tool" not found'), ('acme/public_tool', null)$$,
  'a stranger''s batch reports the private tool as not found and resolves the public one');
select tests.act_as_user('member');
select results_eq($$select requested_tool_id, error from resolve_executor_chains_batch(array['acme/private_tool'])
                     where depth is null or depth = 0$$,
  $$values ('acme/private_tool', null::text)$$, 'a member''s batch resolves the private tool');

-- search
select tests.act_as_user('anon');
select is_empty($$select tool_id from search_tools('acme private') where tool_id = 'acme/private_tool'$$,
  'anon''s search does not find the private tool');
select tests.act_as_user('stranger');
select is_empty($$select tool_id from search_tools('private_tool') where tool_id = 'acme/private_tool'$$,
  'a stranger''s search does not find the private tool');
select is_empty($$select tool_id from search_tools('namespace:acme') where tool_id = 'acme/private_tool'$$,
  'a stranger''s listing of acme does not show the private tool');
select tests.act_as_user('owner');
select results_eq($$select tool_id from search_tools('acme private') where tool_id like 'acme/%' limit 1$$,
  $$values ('acme/private_tool')$$, 'the owner''s search finds the private tool first (it has both words)');
select tests.act_as_user('member');
select results_eq($$select tool_id from search_tools('private acme') where tool_id like 'acme/%' limit 1$$,
  $$values ('acme/private_tool')$$, 'a member''s search finds the private tool first');
select tests.act_as_user('service_role');
select results_eq($$select tool_id from search_tools('acme private') where tool_id like 'acme/%' limit 1$$,
  $$values ('acme/private_tool')$$, 'service_role''s search finds the private tool first');
select tests.act_as_admin();
select results_eq($$select tool_id from search_tools('acme private') where tool_id like 'acme/%' limit 1$$,
  $$values ('acme/private_tool')$$, 'postgres''s search finds the private tool first');

-- views
select tests.act_as_user('stranger');
select is_empty($$select tool_id from tool_catalog where tool_id = 'acme/private_tool'$$,
  'a stranger''s tool_catalog does not list the private tool');
select is_empty($$select tool_id from tool_version_history where tool_id = 'acme/private_tool'$$,
  'a stranger''s tool_version_history does not show the private tool');
select is_empty($$select 1 from tool_dependents where 'acme/private_tool' = any (tools)$$,
  'a stranger''s tool_dependents does not name the private tool');
select tests.act_as_user('member');
select results_eq($$select tool_id, executor_chain, chain_error from tool_catalog where tool_id = 'acme/private_tool'$$,
  $$values ('acme/private_tool', 'acme/private_tool -> bash_runtime -> subprocess', null::text)$$,
  'a member''s tool_catalog lists the private tool with its chain');

-- a private executor stays private: a stranger cannot build on it (runtimes choose a
-- command, so an admin publishes them, here into acme)
select tests.act_as_user('service_role');
select is(publish_tool_version('{"tool_id": "acme/secret_runtime", "tool_type": "runtime", "executor": "subprocess",
                                 "version": "1.0.0", "visibility": "private"}') ->> 'created', 'true',
  'an admin publishes a private runtime into acme');
select tests.act_as_user('stranger');
insert into namespaces (namespace, owner_id) values ('stranger_co', tests.stranger_id());
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "stranger_co/piggyback", "tool_type": "script", "executor": "acme/secret_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo hi"}]')$$,
  'PT404', 'executor "acme/secret_runtime" of tool "stranger_co/piggyback" not found',
  'a stranger cannot publish a tool that executes on a private runtime of another namespace');

select * from finish();
rollback;
