-- yank_tool_version, unyank_tool_version, deprecate_tool_version and delete_tool:
-- members of the tool's namespace and admins may; a stranger is refused (42501), or
-- told the tool is not found (PT404) when it is private; anon may not call them at
-- all; official and builtin tools are for admins only.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(32);
select tests.make_acme();

-- anon: no execute grant
select tests.act_as_user('anon');
select throws_ok($$select yank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'permission denied for function yank_tool_version', 'anon cannot yank');
select throws_ok($$select unyank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'permission denied for function unyank_tool_version', 'anon cannot unyank');
select throws_ok($$select deprecate_tool_version('acme/public_tool', '1.0.0', 'old')$$,
  '42501', 'permission denied for function deprecate_tool_version', 'anon cannot deprecate');
select throws_ok($$select delete_tool('acme/public_tool')$$,
  '42501', 'permission denied for function delete_tool', 'anon cannot delete a tool');

-- a stranger: refused on what they can see, not found on what they cannot
select tests.act_as_user('stranger');
select throws_ok($$select yank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'you cannot change tool "acme/public_tool"', 'a stranger cannot yank a version of acme''s public tool');
select throws_ok($$select yank_tool_version('acme/unlisted_tool', '1.0.0')$$,
  '42501', 'you cannot change tool "acme/unlisted_tool"', 'a stranger cannot yank a version of acme''s unlisted tool');
select throws_ok($$select yank_tool_version('acme/private_tool', '1.0.0')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger trying to yank acme''s private tool is told it is not found');
select throws_ok($$select unyank_tool_version('acme/public_tool', '1.0.0')$$,
  '42501', 'you cannot change tool "acme/public_tool"', 'a stranger cannot unyank');
select throws_ok($$select deprecate_tool_version('acme/public_tool', '1.0.0', 'use mine')$$,
  '42501', 'you cannot change tool "acme/public_tool"', 'a stranger cannot deprecate acme''s public tool');
select throws_ok($$select deprecate_tool_version('acme/private_tool', '1.0.0', 'use mine')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger trying to deprecate acme''s private tool is told it is not found');
select throws_ok($$select delete_tool('acme/public_tool')$$,
  '42501', 'you cannot change tool "acme/public_tool"', 'a stranger cannot delete acme''s public tool');
select throws_ok($$select delete_tool('acme/unlisted_tool')$$,
  '42501', 'you cannot change tool "acme/unlisted_tool"', 'a stranger cannot delete acme''s unlisted tool');
select throws_ok($$select delete_tool('acme/private_tool')$$,
  'PT404', 'tool "acme/private_tool" not found', 'a stranger trying to delete acme''s private tool is told it is not found');

-- members of acme and the platform's tools
select tests.act_as_user('owner');
select throws_ok($$select yank_tool_version('bash_runtime', (select latest_version from tools where ref = 'bash_runtime'))$$,
  '42501', 'you cannot change tool "bash_runtime"', 'the owner of acme cannot yank the builtin bash_runtime');
select throws_ok($$select delete_tool('hello_world')$$,
  '42501', 'you cannot change tool "hello_world"', 'the owner of acme cannot delete a tool of the public namespace');
select tests.act_as_user('member');
select throws_ok($$select deprecate_tool_version('subprocess', (select latest_version from tools where ref = 'subprocess'), 'x')$$,
  '42501', 'you cannot change tool "subprocess"', 'a member of acme cannot deprecate the subprocess primitive');

-- members of acme change acme's tools
select tests.act_as_user('owner');
select is(yank_tool_version('acme/public_tool', '1.0.0', 'broken') ->> 'is_yanked', 'true',
  'the owner yanks a version of acme''s public tool');
select is(unyank_tool_version('acme/public_tool', '1.0.0') ->> 'is_yanked', 'false',
  'the owner unyanks it');
select tests.act_as_user('member');
select is(deprecate_tool_version('acme/private_tool', '1.0.0', 'use 2.x') ->> 'is_deprecated', 'true',
  'a member deprecates a version of acme''s private tool');
select is(yank_tool_version('acme/private_tool', '1.0.0') ->> 'latest_version', null,
  'a member yanks the only version of acme''s private tool, which then has no latest');
select is(delete_tool('acme/unlisted_tool') ->> 'deleted', 'true', 'a member deletes acme''s unlisted tool');
select throws_ok($$select yank_tool_version('acme/public_tool', '9.9.9')$$,
  'PT404', 'version 9.9.9 of tool "acme/public_tool" not found', 'a member yanking a version that does not exist is told so');

-- admins change anything, official and builtin included
select tests.act_as_user('service_role');
select is(publish_tool_version(
            '{"tool_id": "acme/blessed", "tool_type": "script", "executor": "bash_runtime", "version": "1.0.0", "is_official": true}',
            '[{"path": "main.sh", "content_text": "echo blessed"}]') ->> 'created',
  'true', 'service_role publishes an official tool into acme');
select tests.act_as_user('member');
select throws_ok($$select yank_tool_version('acme/blessed', '1.0.0')$$,
  '42501', 'only an admin may yank tool "acme/blessed": it is official', 'a member of acme cannot yank an official tool in acme');
select throws_ok($$select delete_tool('acme/blessed')$$,
  '42501', 'only an admin may delete tool "acme/blessed": it is official', 'a member of acme cannot delete an official tool in acme');
select tests.act_as_user('service_role');
select is(deprecate_tool_version('acme/blessed', '1.0.0', 'superseded') ->> 'is_deprecated', 'true',
  'service_role deprecates an official tool');
select is(yank_tool_version('acme/public_tool', '1.0.0', 'policy') ->> 'is_yanked', 'true',
  'service_role yanks a version in any namespace');
select is(delete_tool('acme/blessed') ->> 'deleted', 'true', 'service_role deletes an official tool');
select tests.act_as_admin();
select is(unyank_tool_version('acme/public_tool', '1.0.0') ->> 'is_yanked', 'false', 'postgres unyanks a version');

-- what is left, seen as admin
select results_eq($$select ref, latest_version from tools where namespace = 'acme' order by ref$$,
  $$values ('acme/private_tool', null::text), ('acme/public_tool', '1.0.0')$$,
  'only members'' and admins'' lifecycle changes reached acme''s tools');
select results_eq($$select manifest ->> 'tool_id', is_yanked, is_deprecated, deprecation_message from tool_versions
                     where manifest ->> 'tool_id' like 'acme/%' order by 1$$,
  $$values ('acme/private_tool', true, true, 'use 2.x'), ('acme/public_tool', false, false, null)$$,
  'the versions carry exactly the allowed yanks and deprecations');
select ok((select not is_yanked and not is_deprecated from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = 'bash_runtime' and v.is_latest), 'bash_runtime''s latest version is untouched');

select * from finish();
rollback;
