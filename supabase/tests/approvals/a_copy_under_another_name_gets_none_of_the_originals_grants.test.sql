-- Rate limits and approval policies name tools, not content. A copy of a tool under another
-- name is another tool: in another namespace it gets none of what the original was granted
-- (here the secret an admin granted acme: publish refuses the copy that reads it), so the
-- copy runs ungated with nothing more than its author could write anyway. Inside the
-- namespace a member may publish a tool reading the namespace's secrets, so a policy that
-- guards them names the namespace (acme/*), which holds any copy there.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
delete from public.approvals;
delete from public.approval_policies;
select plan(8);
select tests.make_acme();

select tests.act_as_user('service_role');
select grant_secret('acme', 'ACME_DEPLOY_KEY');
select tests.act_as_admin();
insert into namespaces (namespace, owner_id) values ('copycat', tests.stranger_id());
create function tests.deploy(p_ref text, p_config jsonb) returns jsonb language sql as $$
  select public.publish_tool_version(
    jsonb_build_object('tool_id', p_ref, 'tool_type', 'script', 'executor', 'bash_runtime', 'version', '1.0.0',
                       'visibility', 'public', 'config', p_config),
    '[{"path": "main.sh", "content_text": "deploy --key \"$KEY\""}]'::jsonb) $$;
create function tests.call(p_ref text) returns jsonb language sql as $$
  select public.check_call(jsonb_build_object('tool_id', p_ref, 'params_sha256', repeat('a', 64))) $$;
grant execute on function tests.deploy(text, jsonb), tests.call(text) to authenticated;

select tests.act_as_user('member');
select is(tests.deploy('acme/deploy', '{"env": {"KEY": "${ACME_DEPLOY_KEY}"}}') ->> 'created', 'true',
  'acme''s deploy reads the key an admin granted acme');
select tests.act_as_admin();
insert into approval_policies (pattern, ttl_seconds) values ('acme/deploy', 600);

select tests.act_as_user('stranger');
select throws_like($$select tests.deploy('copycat/deploy', '{"env": {"KEY": "${ACME_DEPLOY_KEY}"}}')$$,
  '%ACME_DEPLOY_KEY%', 'the same content under the stranger''s name cannot read acme''s key: publish refuses it');
select is(tests.deploy('copycat/deploy', '{}') ->> 'created', 'true', 'a copy without the key publishes ...');
select ok(not (resolve_execution_plan('copycat/deploy') -> 'allowed_variables') ? 'ACME_DEPLOY_KEY',
  '... and its plan reads nothing acme was granted');
select is(tests.call('copycat/deploy') ->> 'allowed', 'true',
  'so it runs ungated: it reaches nothing its author could not write anyway');
select is(tests.call('acme/deploy') ->> 'kind', 'approval_pending', 'while the original is held');

-- inside the namespace: a member's copy reads the namespace's grant, so the policy names the namespace
select tests.act_as_user('member');
select is(tests.deploy('acme/deploy_again', '{"env": {"KEY": "${ACME_DEPLOY_KEY}"}}') ->> 'created', 'true',
  'a member may publish another tool of acme reading acme''s key');
select tests.act_as_admin();
insert into approval_policies (pattern, ttl_seconds) values ('acme/*', 600);
select tests.act_as_user('member');
select is(tests.call('acme/deploy_again') ->> 'kind', 'approval_pending',
  'a policy naming the namespace (acme/*) holds every tool there, that copy too');

select * from finish();
rollback;
