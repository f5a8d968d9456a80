begin;
\ir ../_setup.sql
select plan(16);
select tests.make_acme();
select tests.publish('filesystem_mcp.read_file', 'mcp_tool', 'filesystem_mcp');
select tests.publish('filesystem_mcp.list_directory', 'mcp_tool', 'filesystem_mcp');
select tests.publish('slack_mcp.post_message', 'mcp_tool', 'slack_mcp');
select public.publish_tool_version(
  '{"tool_id": "hello_world_extended", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0",
    "description": "hello world, hello world, hello world greetings for everyone in the world", "tags": ["hello", "world"]}',
  '[{"path": "a.sh", "content_text": "echo"}]');

select is((select tool_id from search_tools('hello_world') limit 1), 'hello_world',
          'an exact id ranks first, even against a tool that repeats the words');
select is((select tool_id from search_tools('format_bytes') limit 1), 'format_bytes', 'an exact id ranks first');
select is((select tool_id from search_tools('helo wrld') limit 1), 'hello_world', 'typos are tolerated');
select is((select tool_id from search_tools('fromat_bytes') limit 1), 'format_bytes', 'transposed letters are tolerated');
select ok(exists (select 1 from search_tools('format_b') where tool_id = 'format_bytes'), 'a partial id finds the tool');
select ok(exists (select 1 from search_tools('human readable size') where tool_id = 'format_bytes'),
          'words of the description find the tool');
select ok(exists (select 1 from search_tools('humanize') where tool_id = 'format_bytes'), 'tags find the tool');

select results_eq($$ select tool_id from search_tools('type:bash') order by tool_id $$,
  $$ values ('acme/private_tool'), ('acme/public_tool'), ('git_checkpoint'), ('hello_world'), ('hello_world_extended') $$,
  'type:bash finds the tools running on bash_runtime (an admin sees private ones too)');
select results_eq($$ select tool_id from search_tools('type:mcp_server slack') $$,
  $$ values ('slack_mcp') $$, 'type: filters by tool type and combines with words');
select results_eq($$ select tool_id from search_tools('mcp:filesystem') order by tool_id $$,
  $$ values ('filesystem_mcp.list_directory'), ('filesystem_mcp.read_file') $$,
  'mcp:SERVER lists the tools that server serves');
select ok(array['format_bytes', 'word_count'] <@ array(select tool_id from search_tools('category:examples text'))
          and not exists (select 1 from search_tools('category:examples text') where category <> 'examples'),
          'category: filters by category');
select is((select count(*)::int from search_tools('bash', p_tool_type => 'runtime')), 1,
          'the p_tool_type argument filters too');

select is((select count(*)::int from search_tools('acme') where tool_id = 'acme/unlisted_tool'), 0,
          'unlisted tools never appear, even to admins');
select tests.act_as_user('stranger');
select is((select count(*)::int from search_tools('acme') where tool_id = 'acme/private_tool'), 0,
          'private tools are hidden from non-members');
select tests.act_as_user('member');
select is((select count(*)::int from search_tools('acme') where tool_id = 'acme/private_tool'), 1,
          'members find their private tools');
select tests.act_as_admin();

update tools set run_count = 500 where ref = 'word_count';
update tools set run_count = 100 where ref = 'http_echo';
select results_eq($$ select tool_id from search_tools('', p_limit => 2) $$,
  $$ values ('word_count'), ('http_echo') $$, 'an empty query lists the most used first');

select * from finish();
rollback;
