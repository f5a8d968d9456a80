-- tool_merged_config: each tool's config as its latest version runs with it, merged from the
-- primitive up, for the dashboard's SQL editor; read as the reader (security_invoker, RLS),
-- so a private tool and its private runtime show only to those who may see them, and a tool
-- that cannot be planned shows its error without failing the query.
begin;
\ir ../_setup.sql
select plan(11);
select tests.make_acme();

-- a private runtime in acme, a private script of acme's on it, and a tool whose runtime is gone
select public.publish_tool_version(
  '{"tool_id": "acme/secret_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "1.0.0",
    "visibility": "private", "config": {"command": "bash", "args": ["{entrypoint}"], "env": {"LEVEL": "runtime"}}}');
select public.publish_tool_version(
  '{"tool_id": "acme/on_secret", "tool_type": "script", "executor": "acme/secret_runtime", "version": "1.0.0",
    "visibility": "private", "config": {"timeout": 7, "env": {"TOOL": "yes"}}}',
  '[{"path": "main.sh", "content_text": "echo hi"}]');
select tests.force_tool('orphan_tool', 'script', 'no_such_runtime');

select is((select reloptions from pg_class where oid = 'public.tool_merged_config'::regclass),
  array['security_invoker=true'], 'the view reads as its reader');

select tests.act_as_user('owner');
select results_eq(
  $$select executor_chain, config ->> 'command', config -> 'env', (config ->> 'timeout')::int, chain_error
      from tool_merged_config where tool_id = 'acme/on_secret'$$,
  $$values ('acme/on_secret -> acme/secret_runtime -> subprocess', 'bash',
            '{"LEVEL": "runtime", "TOOL": "yes"}'::jsonb, 7, null::text)$$,
  'a member sees the merged config: the runtime''s command, env merged across levels, the tool''s timeout');
select is((select config ->> 'command' from tool_merged_config where tool_id = 'acme/private_tool'), 'bash',
  'a member sees its namespace''s private tool, on bash_runtime');
select is((select version from tool_merged_config where tool_id = 'acme/private_tool'), '1.0.0',
  'with the version it would run');

select tests.act_as_user('stranger');
select is((select count(*)::int from tool_merged_config
            where tool_id in ('acme/private_tool', 'acme/secret_runtime', 'acme/on_secret')), 0,
  'a stranger sees no private tool of acme');
select ok((select config is null and chain_error like '%no_such_runtime%' from tool_merged_config where tool_id = 'orphan_tool'),
  'a tool that cannot be planned shows its error');
select ok((select count(*) > 10 from tool_merged_config where chain_error is null),
  'and the other rows are there all the same');
select is((select config ->> 'command' from tool_merged_config where tool_id = 'hello_world'), 'bash',
  'a stranger sees the public seed tools'' configs');

select tests.act_as_user('anon');
select is((select count(*)::int from tool_merged_config where namespace = 'acme' and tool_id <> 'acme/public_tool'
            and chain_error is null), 0, 'anon plans nothing of acme but its public tool');
select is((select config ->> 'command' from tool_merged_config where tool_id = 'acme/public_tool'), 'bash',
  'anon sees the public tool''s merged config');

select tests.act_as_admin();
select is((select count(*)::int from tool_merged_config where namespace = 'acme' and chain_error is null), 5,
  'the dashboard''s own role sees every tool of acme planned');

select * from finish();
rollback;
