-- service_role is an admin: it holds every privilege on the registry's tables and
-- bypasses RLS, so it may write tools, versions and files directly (a repair, an
-- import). The triggers still hold it to the registry's rules, and what it is refused
-- must be refused for breaking a rule (23503, 23514), never for lacking a privilege on
-- the triggers' own helpers. The cells tools × insert × service_role and
-- tool_versions × insert × service_role of the matrix live here.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(12);
select tests.make_acme();
select tests.act_as_user('service_role');

-- tools
select lives_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                  values ('acme', 'imported', 'script', 'bash_runtime', 'Imported')$$,
  'service_role inserts a tool directly');
select throws_ok($$insert into tools (namespace, tool_id, tool_type, executor_id, name)
                   values ('acme', 'orphan', 'script', 'no_such_runtime', 'Orphan')$$,
  '23503', 'executor "no_such_runtime" of tool "acme/orphan" does not exist',
  'service_role cannot insert a tool whose executor does not exist: the trigger refuses it');
select throws_ok($$update tools set executor_id = 'subprocess' where ref = 'acme/public_tool'$$,
  '23514', 'tool "acme/public_tool" (script) cannot execute on "subprocess" (primitive): a script executes on runtime',
  'service_role cannot point a script at a primitive: the executor matrix refuses it');
select throws_ok($$update tools set tool_type = 'api' where ref = 'acme/public_tool'$$,
  '23514', 'tool "acme/public_tool" is a script: its type cannot change to api',
  'service_role cannot change a tool''s type');

-- tool_versions
select lives_ok($$insert into tool_versions (tool_uuid, version, executor_id, manifest, content_hash)
                  select t.id, '2.0.0', 'bash_runtime', m.manifest, kiwi_internal.content_hash(m.manifest, '[]')
                    from tools t,
                         (select '{"tool_id": "acme/public_tool", "tool_type": "script", "executor": "bash_runtime", "version": "2.0.0"}'::jsonb as manifest) m
                   where t.ref = 'acme/public_tool'$$,
  'service_role inserts a version directly');
select throws_ok($$insert into tool_versions (tool_uuid, version, executor_id, manifest, content_hash)
                   select t.id, '3.0.0', 'bash_runtime', '{"tool_id": "acme/public_tool", "tool_type": "api", "version": "3.0.0"}', repeat('0', 64)
                     from tools t where t.ref = 'acme/public_tool'$$,
  '23514', 'version 3.0.0 of tool "acme/public_tool" says tool_type api, but the tool is a script',
  'service_role cannot insert a version of another type than its tool');
select lives_ok($$update tool_versions set is_yanked = true, yanked_reason = 'bad build', yanked_at = now()
                  where manifest ->> 'tool_id' = 'acme/unlisted_tool'$$,
  'service_role yanks a version directly');
select is((select latest_version from tools where ref = 'acme/unlisted_tool'), null,
  'yanking the only version directly leaves its tool without a latest version');
select throws_ok($$update tool_versions set manifest = manifest || '{"description": "edited"}' where manifest ->> 'tool_id' = 'acme/private_tool'$$,
  '23514', 'published version 1.0.0 is immutable: only deprecation and yanking may change',
  'service_role cannot edit a published manifest');
select throws_ok($$delete from tool_versions where manifest ->> 'tool_id' = 'acme/private_tool'$$,
  '23514', 'published version 1.0.0 cannot be deleted', 'service_role cannot delete a published version');

-- tool_version_files
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo private'$$,
  '23514', 'file "main.sh" of a published version is immutable', 'service_role cannot change a published file');
select throws_ok($$delete from tool_version_files where content_text = 'echo private'$$,
  '23514', 'file "main.sh" of a published version cannot be deleted', 'service_role cannot delete a published file');

select * from finish();
rollback;
