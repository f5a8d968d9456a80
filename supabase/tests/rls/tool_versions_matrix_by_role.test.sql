-- tool_versions × {select, insert, update, delete} × {anon, owner, member, stranger,
-- service_role}. A version is readable exactly when its tool is; only service_role
-- writes the table directly, and the immutability trigger still holds it to
-- deprecation and yanking. (service_role's direct insert and yank-by-update are in
-- service_role_writes_directly_but_triggers_keep_integrity.test.sql.)
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(28);
select tests.make_acme();

-- select: versions are identified by their manifest's tool_id, independently of
-- what the caller may read in tools.
select tests.act_as_user('anon');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/public_tool')$$, 'anon reads only the public acme tool''s versions');
select tests.act_as_user('owner');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'the owner reads the versions of every acme tool');
select tests.act_as_user('member');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'a member reads the versions of every acme tool');
select tests.act_as_user('stranger');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/public_tool')$$, 'a stranger reads only the public acme tool''s versions');
select tests.act_as_user('service_role');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/private_tool'), ('acme/public_tool'), ('acme/unlisted_tool')$$,
  'service_role reads the versions of every acme tool');

-- insert
select tests.act_as_user('anon');
select throws_ok($$insert into tool_versions (tool_uuid, version, manifest, content_hash)
                   values (gen_random_uuid(), '9.9.9', '{"version": "9.9.9"}', repeat('0', 64))$$,
  '42501', 'permission denied for table tool_versions', 'anon cannot insert a version');
select tests.act_as_user('owner');
select throws_ok($$insert into tool_versions (tool_uuid, version, manifest, content_hash)
                   values (gen_random_uuid(), '9.9.9', '{"version": "9.9.9"}', repeat('0', 64))$$,
  '42501', 'permission denied for table tool_versions', 'the owner cannot insert a version directly');
select tests.act_as_user('member');
select throws_ok($$insert into tool_versions (tool_uuid, version, manifest, content_hash)
                   values (gen_random_uuid(), '9.9.9', '{"version": "9.9.9"}', repeat('0', 64))$$,
  '42501', 'permission denied for table tool_versions', 'a member cannot insert a version directly');
select tests.act_as_user('stranger');
select throws_ok($$insert into tool_versions (tool_uuid, version, manifest, content_hash)
                   values (gen_random_uuid(), '9.9.9', '{"version": "9.9.9"}', repeat('0', 64))$$,
  '42501', 'permission denied for table tool_versions', 'a stranger cannot insert a version');

-- update
select tests.act_as_user('anon');
select throws_ok($$update tool_versions set is_yanked = true where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'anon cannot yank a version by updating it');
select tests.act_as_user('owner');
select throws_ok($$update tool_versions set is_deprecated = true where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'the owner cannot deprecate by updating the table (deprecate_tool_version is the way)');
select throws_ok($$update tool_versions set manifest = manifest || '{"description": "edited"}' where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'the owner cannot edit a published manifest');
select tests.act_as_user('member');
select throws_ok($$update tool_versions set is_yanked = true where manifest ->> 'tool_id' = 'acme/private_tool'$$,
  '42501', 'permission denied for table tool_versions', 'a member cannot yank by updating the table');
select tests.act_as_user('stranger');
select throws_ok($$update tool_versions set is_yanked = true where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'a stranger cannot update a version');
select tests.act_as_user('service_role');
select is(tests.rows_affected($$update tool_versions set is_deprecated = true, deprecation_message = 'use 2.x'
                                  where manifest ->> 'tool_id' = 'acme/public_tool'$$), 1,
  'service_role deprecates a version directly');
select throws_ok($$update tool_versions set manifest = manifest || '{"description": "edited"}' where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '23514', 'published version 1.0.0 is immutable: only deprecation and yanking may change',
  'service_role cannot edit a published manifest: the trigger refuses it');
select throws_ok($$update tool_versions set content_hash = repeat('0', 64) where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '23514', 'published version 1.0.0 is immutable: only deprecation and yanking may change',
  'service_role cannot change a published content_hash');
select throws_ok($$update tool_versions set version = '1.0.1', manifest = manifest || '{"version": "1.0.1"}' where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '23514', 'published version 1.0.0 is immutable: only deprecation and yanking may change',
  'service_role cannot renumber a published version');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'anon cannot delete a version');
select tests.act_as_user('owner');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'the owner cannot delete a version');
select tests.act_as_user('member');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/private_tool'$$,
  '42501', 'permission denied for table tool_versions', 'a member cannot delete a version');
select tests.act_as_user('stranger');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_versions', 'a stranger cannot delete a version');
select tests.act_as_user('service_role');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '23514', 'published version 1.0.0 cannot be deleted',
  'service_role cannot delete a published version: yanking is the way');

-- what is left, seen as admin
select tests.act_as_admin();
select results_eq(
  $$select manifest ->> 'tool_id', version, is_latest, is_yanked, is_deprecated, deprecation_message
      from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/private_tool', '1.0.0', true, false, false, null::text),
           ('acme/public_tool', '1.0.0', true, false, true, 'use 2.x'),
           ('acme/unlisted_tool', '1.0.0', true, false, false, null::text)$$,
  'only service_role''s deprecation reached tool_versions');
select is((select manifest ->> 'description' from tool_versions where manifest ->> 'tool_id' = 'acme/public_tool'),
  'acme public tool', 'the published manifest is unchanged');

-- versions follow their tool: a member who leaves stops reading its private versions
delete from namespace_members where namespace = 'acme' and user_id = tests.member_id();
select tests.act_as_user('member');
select results_eq($$select manifest ->> 'tool_id' from tool_versions where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/public_tool')$$, 'a former member reads only the public acme tool''s versions');
select tests.act_as_user('owner');
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' = 'acme/private_tool'), 1,
  'the owner still reads the private tool''s version');
select tests.act_as_admin();
select is((select count(*)::int from tool_versions where manifest ->> 'tool_id' like 'acme/%'), 3,
  'postgres reads every acme version');

select * from finish();
rollback;
