-- namespace_members × {select, insert, update, delete} × {anon, owner, member,
-- stranger, service_role}. A user sees their own memberships and the members of
-- namespaces they belong to; owners add and remove members; nobody but service_role
-- changes a membership in place; anon has no access at all.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(33);
select tests.make_acme();
-- The stranger belongs to a namespace of their own, so "their own memberships" is
-- not empty.
select tests.act_as_user('stranger');
insert into namespaces (namespace, owner_id) values ('stranger_co', tests.stranger_id());

-- select
select tests.act_as_user('anon');
select throws_ok($$select * from namespace_members$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot read memberships');
select tests.act_as_user('owner');
select results_eq($$select namespace, user_id, role from namespace_members order by namespace, role desc$$,
  $$values ('acme', tests.owner_id(), 'owner'), ('acme', tests.member_id(), 'member')$$,
  'the owner sees acme''s members and nothing of other namespaces');
select tests.act_as_user('member');
select results_eq($$select namespace, user_id, role from namespace_members order by namespace, role desc$$,
  $$values ('acme', tests.owner_id(), 'owner'), ('acme', tests.member_id(), 'member')$$,
  'a member sees the members of the namespaces they belong to');
select tests.act_as_user('stranger');
select results_eq($$select namespace, user_id, role from namespace_members order by namespace, role desc$$,
  $$values ('stranger_co', tests.stranger_id(), 'owner')$$,
  'a stranger sees their own memberships and none of acme''s');
select tests.act_as_user('service_role');
select results_eq($$select namespace, user_id, role from namespace_members where namespace in ('acme', 'stranger_co') order by namespace, role desc$$,
  $$values ('acme', tests.owner_id(), 'owner'), ('acme', tests.member_id(), 'member'),
           ('stranger_co', tests.stranger_id(), 'owner')$$,
  'service_role sees every membership');

-- insert
select tests.act_as_user('anon');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('acme', gen_random_uuid())$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot add a member');
select tests.act_as_user('member');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('acme', tests.stranger_id())$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'a member (not an owner) cannot add members');
select throws_ok($$insert into namespace_members (namespace, user_id, role) values ('acme', gen_random_uuid(), 'owner')$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'a member cannot add an owner');
select tests.act_as_user('stranger');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('acme', tests.stranger_id())$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'a stranger cannot join acme on their own');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('public', tests.stranger_id())$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'a stranger cannot join the public namespace (and so publish there)');
select throws_ok($$insert into namespace_members (namespace, user_id, created_at) values ('stranger_co', gen_random_uuid(), now())$$,
  '42501', 'permission denied for table namespace_members', 'nobody signed-in writes created_at of a membership');
select tests.act_as_user('owner');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('public', tests.owner_id())$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'the owner of acme cannot join the public namespace');
select throws_ok($$insert into namespace_members (namespace, user_id) values ('stranger_co', tests.owner_id())$$,
  '42501', 'new row violates row-level security policy for table "namespace_members"',
  'the owner of acme cannot join another user''s namespace');
select lives_ok($$insert into namespace_members (namespace, user_id) values ('acme', tests.stranger_id())$$,
  'the owner adds the stranger to acme');
select tests.act_as_user('stranger');
select is((select count(*)::int from tools where namespace = 'acme'), 3,
  'the new member now reads all of acme''s tools');
select tests.act_as_user('service_role');
select lives_ok($$insert into namespace_members (namespace, user_id, role) values ('stranger_co', tests.member_id(), 'member')$$,
  'service_role adds a member to any namespace');

-- update: nobody signed-in changes a membership in place (owners remove and re-add)
select tests.act_as_user('anon');
select throws_ok($$update namespace_members set role = 'owner' where namespace = 'acme'$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot update a membership');
select tests.act_as_user('owner');
select throws_ok($$update namespace_members set role = 'owner' where namespace = 'acme' and user_id = tests.member_id()$$,
  '42501', 'permission denied for table namespace_members', 'the owner cannot update a membership in place');
select tests.act_as_user('member');
select throws_ok($$update namespace_members set role = 'owner' where namespace = 'acme' and user_id = tests.member_id()$$,
  '42501', 'permission denied for table namespace_members', 'a member cannot promote themselves to owner');
select tests.act_as_user('stranger');
select throws_ok($$update namespace_members set user_id = tests.stranger_id() where namespace = 'acme'$$,
  '42501', 'permission denied for table namespace_members', 'a stranger cannot take over a membership');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$update namespace_members set role = 'owner' where namespace = 'stranger_co' and user_id = tests.member_id()$$), 1,
  'service_role updates a membership');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from namespace_members where namespace = 'acme'$$,
  '42501', 'permission denied for table namespace_members', 'anon cannot remove a member');
select tests.act_as_user('member');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.owner_id()$$), 0,
  'a member cannot remove the owner');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.stranger_id()$$), 0,
  'a member cannot remove another member');
select tests.act_as_user('stranger');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.member_id()$$), 0,
  'a member of acme who is not an owner (the stranger, just added) cannot remove others');
select tests.act_as_user('owner');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'stranger_co'$$), 0,
  'the owner of acme cannot remove members of another namespace');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'acme' and user_id = tests.stranger_id()$$), 1,
  'the owner removes a member from acme');
select tests.act_as_user('stranger');
select is((select count(*)::int from tools where namespace = 'acme'), 1,
  'a removed member reads only acme''s public tool again');
select results_eq($$select namespace from namespace_members order by 1$$,
  $$values ('stranger_co'), ('stranger_co')$$,
  'a removed member sees only the memberships of the namespace they still belong to');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$delete from namespace_members where namespace = 'stranger_co' and user_id = tests.member_id()$$), 1,
  'service_role removes a member');

-- what is left, seen as admin
select tests.act_as_admin();
select results_eq($$select namespace, user_id, role from namespace_members where namespace in ('acme', 'stranger_co', 'public') order by namespace, role desc$$,
  $$values ('acme', tests.owner_id(), 'owner'), ('acme', tests.member_id(), 'member'),
           ('stranger_co', tests.stranger_id(), 'owner')$$,
  'only owners'' and service_role''s changes reached namespace_members');
select tests.act_as_user('member');
select results_eq($$select namespace, user_id from namespace_members where user_id = tests.member_id() order by 1$$,
  $$values ('acme', tests.member_id())$$,
  'a member sees their own membership');
select is((select count(*)::int from namespace_members where namespace = 'stranger_co'), 0,
  'a former member of stranger_co no longer sees its members');

select * from finish();
rollback;
