-- Quotas per user and namespace (public.registry_quotas, 520_quotas.sql): creating
-- a namespace and publishing past one is refused (PT422) naming the quota, its value and its
-- row; admins are exempt; the rows are read by everyone and changed by service_role.
begin;
\ir ../_setup.sql
select plan(9);

update registry_quotas set value = 2 where name = 'namespaces_per_user';
update registry_quotas set value = 2 where name = 'versions_per_tool';
update registry_quotas set value = 5000 where name = 'namespace_bytes';

select tests.act_as('authenticated', tests.owner_id());
select lives_ok($$ insert into namespaces (namespace, owner_id) values ('quota_a', tests.owner_id()) $$,
  'a first namespace is created');
select lives_ok($$ insert into namespaces (namespace, owner_id) values ('quota_b', tests.owner_id()) $$,
  'a second one too');
select throws_ok($$ insert into namespaces (namespace, owner_id) values ('quota_c', tests.owner_id()) $$,
  'PT422', 'quota ''namespaces per user'' (2) reached: you own 2 namespaces (registry_quotas.namespaces_per_user)',
  'the third is refused naming the quota and its value');

select lives_ok($$ select tests.publish('quota_a/t', 'script', 'bash_runtime', '1.0.0') $$, 'version one');
select lives_ok($$ select tests.publish('quota_a/t', 'script', 'bash_runtime', '1.1.0') $$, 'version two');
select throws_ok($$ select tests.publish('quota_a/t', 'script', 'bash_runtime', '1.2.0') $$,
  'PT422', 'quota ''versions per tool'' (2) reached: tool "quota_a/t" has 2 versions (registry_quotas.versions_per_tool)',
  'a third version is refused');
select throws_like($$ select public.publish_tool_version('{"tool_id": "quota_b/big", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                                                        jsonb_build_array(jsonb_build_object('path', 'run.sh', 'content_text', repeat('x', 6000)))) $$,
  'quota ''bytes per namespace'' (5000) reached: namespace "quota_b" holds % bytes and this version adds %',
  'a version over the namespace''s bytes is refused');

select tests.act_as_admin();
select lives_ok($$ select tests.publish('quota_a/t', 'script', 'bash_runtime', '1.2.0') $$, 'an admin is exempt');

select tests.act_as('authenticated', tests.owner_id());
select throws_ok($$ update registry_quotas set value = 100 where name = 'namespaces_per_user' $$,
  '42501', null, 'a signed-in user cannot change a quota');

select * from finish();
rollback;
