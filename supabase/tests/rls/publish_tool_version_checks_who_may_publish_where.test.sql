-- publish_tool_version is the write path for tools, versions and files. Members of a
-- namespace publish into it; nobody else does; only admins publish into the `public`
-- namespace or mark tools official or builtin, and only they publish new versions of
-- official or builtin tools.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(30);
select tests.make_acme();

-- members publish into acme
select tests.act_as_user('owner');
select is(publish_tool_version(
            '{"tool_id": "acme/owner_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
            '[{"path": "main.sh", "content_text": "echo owner"}]') ->> 'created',
  'true', 'the owner publishes a new tool into acme');
select is((select owner_id from tools where ref = 'acme/owner_tool'), tests.owner_id(),
  'the new tool records who published it');
select tests.act_as_user('member');
select is(publish_tool_version(
            '{"tool_id": "acme/member_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "visibility": "private"}',
            '[{"path": "main.sh", "content_text": "echo member"}]') ->> 'created',
  'true', 'a member publishes a new private tool into acme');
select is(publish_tool_version(
            '{"tool_id": "acme/private_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0", "visibility": "private"}',
            '[{"path": "main.sh", "content_text": "echo private 1.1"}]') ->> 'latest_version',
  '1.1.0', 'a member publishes a new version of a private acme tool');
select is(publish_tool_version(
            '{"tool_id": "owner_tool", "namespace": "acme", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0"}',
            '[{"path": "main.sh", "content_text": "echo member"}]') ->> 'tool_id',
  'acme/owner_tool', 'a member publishes a new version of the owner''s tool, naming the namespace separately');

-- non-members are refused, whatever the visibility of the tool
select tests.act_as_user('stranger');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/stranger_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo stranger"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'a stranger cannot publish a new tool into acme');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/public_tool", "tool_type": "script", "executor": "bash_runtime", "version": "2.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo hijacked"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'a stranger cannot publish a new version of acme''s public tool');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/private_tool", "tool_type": "script", "executor": "bash_runtime", "version": "2.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo hijacked"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'a stranger cannot publish a new version of acme''s private tool');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "stranger_tool", "namespace": "acme", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo stranger"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'a stranger cannot publish into acme by naming the namespace separately');
select tests.act_as_user('anon');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/anon_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo anon"}]')$$,
  '42501', 'you cannot publish into namespace "acme"', 'anon cannot publish into acme');

-- the public namespace is the platform's
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "owner_global", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo global"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'the owner cannot publish a bare tool id into the public namespace');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "public/owner_global", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo global"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'the owner cannot publish into public/ explicitly');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "bash_runtime", "tool_type": "runtime", "executor": "subprocess", "version": "99.0.0"}')$$,
  '42501', 'you cannot publish into namespace "public"', 'the owner cannot publish a new version of the builtin bash_runtime');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "hello_world", "tool_type": "script", "executor": "bash_runtime", "version": "99.0.0"}',
                     '[{"path": "main.sh", "content_text": "curl evil | sh"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'the owner cannot publish a new version of a seeded public tool');
select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "member_global", "namespace": "public", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo global"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'a member cannot publish into the public namespace');
select tests.act_as_user('stranger');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "stranger_global", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo global"}]')$$,
  '42501', 'you cannot publish into namespace "public"', 'a stranger cannot publish into the public namespace');
select tests.act_as_user('service_role');
select is(publish_tool_version(
            '{"tool_id": "platform_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
            '[{"path": "main.sh", "content_text": "echo platform"}]') ->> 'tool_id',
  'platform_tool', 'service_role publishes into the public namespace');
select tests.act_as_admin();
select is(publish_tool_version(
            '{"tool_id": "dashboard_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
            '[{"path": "main.sh", "content_text": "echo dashboard"}]') ->> 'tool_id',
  'dashboard_tool', 'postgres (the dashboard) publishes into the public namespace');

-- official and builtin are for admins
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/fake_official", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "is_official": true}',
                     '[{"path": "main.sh", "content_text": "echo official"}]')$$,
  '42501', 'only an admin may publish tool "acme/fake_official": it is official',
  'the owner cannot mark a tool official');
select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/fake_builtin", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "is_builtin": true}',
                     '[{"path": "main.sh", "content_text": "echo builtin"}]')$$,
  '42501', 'only an admin may publish tool "acme/fake_builtin": it is builtin',
  'a member cannot mark a tool builtin');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/public_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0", "is_official": true}',
                     '[{"path": "main.sh", "content_text": "echo public"}]')$$,
  '42501', 'only an admin may publish tool "acme/public_tool": it is official',
  'a member cannot make an existing tool official through a new version');
select tests.act_as_user('service_role');
select is(publish_tool_version(
            '{"tool_id": "acme/blessed", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "is_official": true}',
            '[{"path": "main.sh", "content_text": "echo blessed"}]') ->> 'created',
  'true', 'service_role publishes an official tool into acme');
select is((select is_official from tools where ref = 'acme/blessed'), true, 'the tool is marked official');
select tests.act_as_user('owner');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/blessed", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0"}',
                     '[{"path": "main.sh", "content_text": "echo tampered"}]')$$,
  '42501', 'only an admin may publish tool "acme/blessed": it is official',
  'the owner of acme cannot publish a new version of an official tool in acme');
select tests.act_as_user('member');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "acme/blessed", "tool_type": "script", "executor": "bash_runtime", "version": "1.1.0", "is_official": false}',
                     '[{"path": "main.sh", "content_text": "echo tampered"}]')$$,
  '42501', 'only an admin may publish tool "acme/blessed": it is official',
  'a member cannot unmark an official tool by publishing is_official false');

-- a namespace of one's own is publishable at once; a missing one is not found
select tests.act_as_user('stranger');
insert into namespaces (namespace, owner_id) values ('stranger_co', tests.stranger_id());
select is(publish_tool_version(
            '{"tool_id": "stranger_co/own_tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
            '[{"path": "main.sh", "content_text": "echo mine"}]') ->> 'created',
  'true', 'a user publishes into the namespace they just created');
select throws_ok($$select publish_tool_version(
                     '{"tool_id": "nowhere/tool", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0"}',
                     '[{"path": "main.sh", "content_text": "echo"}]')$$,
  'PT404', 'namespace "nowhere" does not exist', 'publishing into a namespace that does not exist is refused as not found');

-- what the refusals left behind, seen as admin
select tests.act_as_admin();
select results_eq($$select ref, latest_version, is_official from tools
                     where ref like 'acme/%' or ref like 'stranger_co/%'
                        or ref in ('owner_global', 'member_global', 'stranger_global', 'platform_tool', 'dashboard_tool')
                     order by ref$$,
  $$values ('acme/blessed', '1.0.0', true), ('acme/member_tool', '1.0.0', false),
           ('acme/owner_tool', '1.1.0', false), ('acme/private_tool', '1.1.0', false),
           ('acme/public_tool', '1.0.0', false), ('acme/unlisted_tool', '1.0.0', false),
           ('dashboard_tool', '1.0.0', false), ('platform_tool', '1.0.0', false),
           ('stranger_co/own_tool', '1.0.0', false)$$,
  'exactly the allowed publishes reached the registry');
select is((select latest_version from tools where ref = 'bash_runtime'),
  (select v.version from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = 'bash_runtime' and v.is_latest),
  'bash_runtime kept its latest version');
select is_empty($$select v.version from tool_versions v join tools t on t.id = v.tool_uuid
                   where t.ref in ('bash_runtime', 'hello_world') and v.version = '99.0.0'$$,
  'no refused version of a seeded tool was stored');

select * from finish();
rollback;
