-- A granted variable publishes and its plan allows it. Once an admin grants namespace acme
-- a variable (grant_secret: a NAME, or a PREFIX_* covering the names and prefixes that begin
-- with it), a member's tool there may read it, and its plan's allowed_variables (a sorted
-- list of NAMEs and PREFIX_* patterns) carries it beside what the chain's admin-published
-- elements read, in the cached plan and the live one alike. A plan carries of the grants
-- only what the tool's own config names. Revoking the grant rebuilds the plan without it.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(10);
select tests.make_acme();

create function tests.expected() returns jsonb language sql as $$
  select (select jsonb_agg(v order by v collate "C")
            from (select jsonb_array_elements_text(resolve_execution_plan('bash_runtime') -> 'allowed_variables')
                  union select unnest(array['ACME_TOKEN', 'ACME_CLOUD_REGION', 'ACME_CLOUD_AUTH_*'])) x(v)) $$;
grant execute on function tests.expected() to anon, authenticated, service_role;
select tests.act_as_user('service_role');
select is(grant_secret('acme', 'ACME_TOKEN') ->> 'variable', 'ACME_TOKEN', 'an admin grants a name');
select is(grant_secret('acme', 'ACME_CLOUD_*') ->> 'variable', 'ACME_CLOUD_*', 'and a prefix');
select grant_secret('acme', 'ACME_UNUSED');

select tests.act_as_user('member');
select is(tests.publish('acme/granted', 'script', 'bash_runtime', '1.0.0',
                        '{"env": {"T": "${ACME_TOKEN}", "R": "${ACME_CLOUD_REGION:-eu}"}, "env_passthrough": ["PATH", "ACME_CLOUD_AUTH_*"]}')
          ->> 'created', 'true', 'a member publishes a tool reading what its namespace was granted');
set constraints all immediate;
set constraints all deferred;
select is(resolve_execution_plan('acme/granted') -> 'allowed_variables', tests.expected(),
  'its plan allows them beside what its runtime reads, sorted');
select tests.act_as_admin();
select is((select plan -> 'allowed_variables' from kiwi_internal.plan_cache where tool_ref = 'acme/granted'),
  tests.expected(), 'the cached plan carries them');
select ok(not (resolve_execution_plan('acme/granted') -> 'allowed_variables') ?| array['ACME_UNUSED', 'ACME_CLOUD_*'],
  'a grant the tool does not name is not in its plan');
select is((kiwi_internal.compute_plan((select version_uuid from kiwi_internal.plan_cache where tool_ref = 'acme/granted'),
                                      false, array['acme'])).plan -> 'allowed_variables',
  tests.expected(), 'and a plan computed live for a member says the same');
select tests.act_as_user('anon');
select is(resolve_execution_plan('acme/granted') -> 'allowed_variables', tests.expected(),
  'anyone who may run the public tool gets the same list');

-- revoked: the plan no longer allows it (the version stays as it was published)
select tests.act_as_user('service_role');
select is(revoke_secret('acme', 'ACME_TOKEN') ->> 'revoked', 'true', 'an admin revokes a grant');
select ok(not (resolve_execution_plan('acme/granted') -> 'allowed_variables') ? 'ACME_TOKEN',
  'and the tool''s plan, rebuilt, no longer allows it');

select * from finish();
rollback;
