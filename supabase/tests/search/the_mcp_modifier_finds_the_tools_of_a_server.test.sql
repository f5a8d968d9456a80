-- mcp:S keeps only MCP tools, those a server S serves: its reference (namespace/S, public/S
-- or S), S_mcp for S, any case, and a bare name also finds the server of that name in a
-- namespace (a member's own server, acme/notes, from mcp:notes: it returned nothing).
-- mcp:* keeps every MCP tool (the design documents' "only MCP tools"). It never shows what
-- the caller may not list.
begin;
\ir ../_setup.sql
select plan(12);
select tests.make_acme();

select tests.publish('filesystem_mcp.read_file', 'mcp_tool', 'filesystem_mcp');
select tests.publish('slack_mcp.post_message', 'mcp_tool', 'slack_mcp');
select public.publish_tool_version(
  '{"tool_id": "acme/notes", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0",
    "visibility": "private", "description": "the notes server of acme", "config": {"command": "notes-server"}}', '[]');
select public.publish_tool_version(
  jsonb_build_object('tool_id', 'acme/notes.' || t, 'tool_type', 'mcp_tool', 'executor', 'acme/notes',
                     'version', '1.0.0', 'visibility', 'private', 'description', 'notes: ' || t,
                     'config', jsonb_build_object('tool', t)), '[]')
  from unnest(array['add_note', 'find_note']) t;

select results_eq($$ select tool_id from search_tools('mcp:filesystem') $$, $$ values ('filesystem_mcp.read_file') $$,
  'mcp:S finds the tools of S_mcp');
select results_eq($$ select tool_id from search_tools('mcp:Filesystem_MCP') $$, $$ values ('filesystem_mcp.read_file') $$,
  'in any case, by its full id too');
select results_eq($$ select tool_id from search_tools('mcp:public/filesystem_mcp') $$,
  $$ values ('filesystem_mcp.read_file') $$, 'and by its reference in the public namespace');
select results_eq($$ select tool_id from search_tools('mcp:notes') order by tool_id $$,
  $$ values ('acme/notes.add_note'), ('acme/notes.find_note') $$,
  'a bare name finds the tools of a namespace''s server of that name (not the server itself)');
select results_eq($$ select tool_id from search_tools('mcp:acme/notes find') $$, $$ values ('acme/notes.find_note') $$,
  'a namespaced reference works too, and combines with words');
select ok(array['acme/notes.add_note', 'acme/notes.find_note', 'filesystem_mcp.read_file', 'slack_mcp.post_message']
           <@ array(select tool_id from search_tools('mcp:*', p_limit => 200))
          and not exists (select 1 from search_tools('mcp:*', p_limit => 200) where tool_type <> 'mcp_tool'),
          'mcp:* keeps every MCP tool, and nothing else');
select ok(exists (select 1 from search_tools('mcp:* post') where tool_id = 'slack_mcp.post_message')
          and not exists (select 1 from search_tools('mcp:* post') where tool_type <> 'mcp_tool'),
          'mcp:* combines with words');
select is((select count(*)::int from search_tools('mcp:no_such_server')), 0, 'an unknown server finds nothing');
select is((select count(*)::int from search_tools('mcp:filesystem', p_limit => 1000) where tool_type <> 'mcp_tool'), 0,
          'only MCP tools, never the server itself');

select tests.act_as_user('member');
select results_eq($$ select tool_id from search_tools('mcp:notes') order by tool_id $$,
  $$ values ('acme/notes.add_note'), ('acme/notes.find_note') $$, 'a member finds its namespace''s private server''s tools');
select tests.act_as_user('stranger');
select is((select count(*)::int from search_tools('mcp:notes')), 0, 'a stranger finds none of them');
select is((select count(*)::int from search_tools('mcp:*') where tool_id like 'acme/%'), 0,
          'nor through mcp:*');

select * from finish();
rollback;
