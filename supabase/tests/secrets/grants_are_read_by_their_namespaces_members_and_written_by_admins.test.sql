-- Grants are read by their namespace's members and written by admins. A member of acme
-- reads acme's grants and no other namespace's; anon reads none; only an admin grants or
-- revokes (grant_secret and revoke_secret refuse anyone else, naming why, and a direct
-- write is refused too). A grant names a NAME or a PREFIX_*, in a namespace that exists.
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(14);
select tests.make_acme();
insert into public.namespaces (namespace, owner_id) values ('beta', tests.stranger_id());

select tests.act_as_user('service_role');
select grant_secret('acme', 'ACME_TOKEN');
select grant_secret('beta', 'BETA_TOKEN');
select is((select count(*)::int from namespace_secret_grants), 2, 'an admin reads every grant');

select tests.act_as_user('member');
select results_eq($$select namespace, variable from namespace_secret_grants$$,
  $$values ('acme'::text, 'ACME_TOKEN'::text)$$, 'a member of acme reads acme''s grants only');
select tests.act_as_user('stranger');
select results_eq($$select namespace, variable from namespace_secret_grants$$,
  $$values ('beta'::text, 'BETA_TOKEN'::text)$$, 'the owner of beta reads beta''s only');
select tests.act_as_user('anon');
select throws_ok($$select * from namespace_secret_grants$$, '42501', null, 'anon reads none');

-- a public tool of beta reading its grant: its plan tells others no more than its manifest
select tests.act_as_user('service_role');
select tests.publish('beta/reads', 'script', 'bash_runtime', '1.0.0', '{"env": {"T": "${BETA_TOKEN}"}}');
select grant_secret('beta', 'BETA_OTHER');
select tests.act_as_user('member');
select ok(not (resolve_execution_plan('beta/reads') -> 'allowed_variables') ? 'BETA_OTHER',
  'a plan of another namespace''s tool shows none of its grants the tool does not name');

select tests.act_as_user('owner');
select throws_ok($$select grant_secret('acme', 'ANY')$$, '42501',
  'only an admin may grant a namespace the variables of the runner''s environment',
  'the owner of the namespace may not grant');
select throws_ok($$select revoke_secret('acme', 'ACME_TOKEN')$$, '42501',
  'only an admin may revoke a namespace''s variables', 'nor revoke');
select throws_ok($$insert into namespace_secret_grants (namespace, variable) values ('acme', 'X')$$, '42501', null,
  'nor write the table');
select throws_ok($$delete from namespace_secret_grants$$, '42501', null, 'nor delete from it');
select tests.act_as_user('anon');
select throws_ok($$select grant_secret('acme', 'ANY')$$, '42501', null, 'anon may not call grant_secret');

select tests.act_as_user('service_role');
select throws_ok($$select grant_secret('acme', 'BAD-NAME')$$, '22023', null, 'a grant names a NAME or a PREFIX_*');
select throws_ok($$select grant_secret('acme', '*')$$, '22023', null, 'not everything at once');
select throws_ok($$select grant_secret('nowhere', 'X')$$, 'PT404', 'namespace "nowhere" does not exist',
  'in a namespace that exists');
select is(revoke_secret('acme', 'ACME_TOKEN') ->> 'revoked', 'true', 'an admin revokes');

select * from finish();
rollback;
