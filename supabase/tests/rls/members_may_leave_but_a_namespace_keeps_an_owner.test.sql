begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(6);
select tests.make_acme();

select tests.act_as_user('member');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.member_id()$$), 1,
  'a member leaves a namespace');
select is((select count(*)::int from tools where namespace = 'acme'), 1,
  'and then reads only its public tool');

select tests.act_as_user('owner');
select throws_ok($$delete from namespace_members where namespace = 'acme' and user_id = tests.owner_id()$$,
  '23514', 'namespace "acme" would have no owner left', 'the last owner cannot leave');
select tests.act_as_admin();
select throws_ok($$update namespace_members set role = 'member' where namespace = 'acme' and user_id = tests.owner_id()$$,
  '23514', 'namespace "acme" would have no owner left', 'nor be demoted, even by an admin');
insert into namespace_members (namespace, user_id, role) values ('acme', tests.stranger_id(), 'owner');
select tests.act_as_user('owner');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.owner_id()$$), 1,
  'an owner leaves once another owner remains');
select tests.act_as_admin();
delete from tools where namespace = 'acme';
select lives_ok($$delete from namespaces where namespace = 'acme'$$,
  'deleting the namespace removes its last owner with it');

select * from finish();
rollback;
