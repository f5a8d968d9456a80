-- namespaces × {select, insert, update, delete} × {anon, owner, member, stranger,
-- service_role}. The directory is public; a signed-in user creates namespaces they
-- own (and so becomes their owner member); only owners describe or delete them.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(37);
select tests.make_acme();

-- select: a public directory
select tests.act_as_user('anon');
select results_eq($$select namespace, display_name from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme', 'Acme'), ('public', 'Public')$$, 'anon reads the namespace directory');
select throws_ok($$select owner_id from namespaces$$, '42501', 'permission denied for table namespaces',
  'anon cannot read who owns a namespace (a user id)');
select tests.act_as_user('owner');
select results_eq($$select namespace, owner_id from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme', tests.owner_id()), ('public', null)$$,
  'the owner reads the namespace directory, owners included (signed-in users may)');
select tests.act_as_user('member');
select results_eq($$select namespace from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme'), ('public')$$, 'a member reads the namespace directory');
select tests.act_as_user('stranger');
select results_eq($$select namespace from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme'), ('public')$$, 'a stranger reads the namespace directory');
select tests.act_as_user('service_role');
select results_eq($$select namespace from namespaces where namespace in ('acme', 'public') order by 1$$,
  $$values ('acme'), ('public')$$, 'service_role reads the namespace directory');

-- insert
select tests.act_as_user('anon');
select throws_ok($$insert into namespaces (namespace, owner_id) values ('anon_co', null)$$,
  '42501', 'permission denied for table namespaces', 'anon cannot create a namespace');
select tests.act_as_user('stranger');
select lives_ok($$insert into namespaces (namespace, display_name, owner_id) values ('stranger_co', 'Stranger Co', tests.stranger_id())$$,
  'a signed-in user creates a namespace they own');
select results_eq($$select user_id, role from namespace_members where namespace = 'stranger_co'$$,
  $$values (tests.stranger_id(), 'owner')$$, 'and becomes its owner member');
select throws_ok($$insert into namespaces (namespace, owner_id) values ('squat_co', tests.owner_id())$$,
  '42501', 'new row violates row-level security policy for table "namespaces"',
  'a signed-in user cannot create a namespace owned by someone else');
select throws_ok($$insert into namespaces (namespace, owner_id) values ('orphan_co', null)$$,
  '42501', 'new row violates row-level security policy for table "namespaces"',
  'a signed-in user cannot create an ownerless (platform) namespace');
select throws_ok($$insert into namespaces (namespace, owner_id, created_at) values ('dated_co', tests.stranger_id(), now() - interval '1 year')$$,
  '42501', 'permission denied for table namespaces', 'a signed-in user cannot backdate a namespace');
select tests.act_as_user('member');
select lives_ok($$insert into namespaces (namespace, owner_id) values ('member_co', tests.member_id())$$,
  'a member of acme creates a namespace of their own');
select throws_ok($$insert into namespaces (namespace, owner_id) values ('acme_two', tests.owner_id())$$,
  '42501', 'new row violates row-level security policy for table "namespaces"',
  'a member cannot create a namespace in the owner''s name');
select tests.act_as_user('owner');
select throws_ok($$insert into namespaces (namespace, owner_id) values ('acme', tests.owner_id())$$,
  '23505', null, 'the owner cannot create acme a second time');
select tests.act_as_user('service_role');
select lives_ok($$insert into namespaces (namespace, display_name) values ('platform_co', 'Platform')$$,
  'service_role creates a platform namespace without an owner');
select is((select count(*)::int from namespace_members where namespace = 'platform_co'), 0,
  'a platform namespace starts without members');

-- update
select tests.act_as_user('anon');
select throws_ok($$update namespaces set display_name = 'Defaced' where namespace = 'acme'$$,
  '42501', 'permission denied for table namespaces', 'anon cannot update a namespace');
select tests.act_as_user('owner');
select is(tests.rows_affected($$update namespaces set display_name = 'Acme Inc', description = 'Tools by Acme' where namespace = 'acme'$$), 1,
  'the owner describes acme');
select throws_ok($$update namespaces set owner_id = tests.stranger_id() where namespace = 'acme'$$,
  '42501', 'permission denied for table namespaces', 'the owner cannot hand acme''s owner_id to someone else');
select throws_ok($$update namespaces set namespace = 'acme_renamed' where namespace = 'acme'$$,
  '42501', 'permission denied for table namespaces', 'the owner cannot rename acme');
select is(tests.rows_affected($$update namespaces set display_name = 'Mine' where namespace = 'public'$$), 0,
  'the owner cannot describe the public namespace');
select tests.act_as_user('member');
select is(tests.rows_affected($$update namespaces set display_name = 'Member Corp' where namespace = 'acme'$$), 0,
  'a member (not an owner) cannot describe acme');
select tests.act_as_user('stranger');
select is(tests.rows_affected($$update namespaces set display_name = 'Pwned' where namespace = 'acme'$$), 0,
  'a stranger cannot describe acme');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$update namespaces set description = 'The platform.' where namespace = 'public'$$), 1,
  'service_role describes the public namespace');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from namespaces where namespace = 'acme'$$,
  '42501', 'permission denied for table namespaces', 'anon cannot delete a namespace');
select tests.act_as_user('member');
select is(tests.rows_affected($$delete from namespaces where namespace = 'acme'$$), 0,
  'a member (not an owner) cannot delete acme');
select tests.act_as_user('stranger');
select is(tests.rows_affected($$delete from namespaces where namespace = 'acme'$$), 0,
  'a stranger cannot delete acme');
select is(tests.rows_affected($$delete from namespaces where namespace = 'member_co'$$), 0,
  'a stranger cannot delete another user''s namespace');
select tests.act_as_user('owner');
select is(tests.rows_affected($$delete from namespaces where namespace = 'public'$$), 0,
  'the owner cannot delete the public namespace');
-- (PostgreSQL 18 reports an ON DELETE RESTRICT key as 23001 "violates RESTRICT setting of
-- foreign key constraint", 15 and 17 as 23503: both name the constraint)
select throws_like($$delete from namespaces where namespace = 'acme'$$,
  'update or delete on table "namespaces" violates %foreign key constraint "tools_namespace_fkey" on table "tools"',
  'the owner cannot delete acme while it holds tools');
select tests.act_as_user('stranger');
select is(tests.rows_affected($$delete from namespaces where namespace = 'stranger_co'$$), 1,
  'an owner deletes an empty namespace of theirs');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$delete from namespaces where namespace = 'platform_co'$$), 1,
  'service_role deletes a namespace');

-- what is left, seen as admin
select tests.act_as_admin();
select results_eq($$select namespace, display_name, description, owner_id from namespaces
                     where namespace in ('acme', 'member_co', 'stranger_co', 'platform_co', 'squat_co', 'orphan_co') order by 1$$,
  $$values ('acme', 'Acme Inc', 'Tools by Acme', tests.owner_id()),
           ('member_co', null, null, tests.member_id())$$,
  'only the owners'' and service_role''s changes reached namespaces');
select is((select description from namespaces where namespace = 'public'), 'The platform.',
  'service_role''s description of public is stored');
select is((select display_name from namespaces where namespace = 'public'), 'Public',
  'the owner''s attempt on public changed nothing');
select is((select count(*)::int from namespace_members where namespace = 'stranger_co'), 0,
  'deleting a namespace removes its memberships');

select * from finish();
rollback;
