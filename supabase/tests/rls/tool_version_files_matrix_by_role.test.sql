-- tool_version_files × {select, insert, update, delete} × {anon, owner, member,
-- stranger, service_role}. A file is readable exactly when its version (and so its
-- tool) is; only service_role writes the table, and the triggers keep published files
-- immutable and every version's content_hash true even for it.
begin;
\ir ../_setup.sql
\ir _helpers.sql
select plan(27);
select tests.make_acme();

-- select: acme's files are 'echo public', 'echo unlisted' and 'echo private'.
select tests.act_as_user('anon');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo public')$$, 'anon reads only the public acme tool''s file');
select tests.act_as_user('owner');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo private'), ('echo public'), ('echo unlisted')$$, 'the owner reads every acme file');
select tests.act_as_user('member');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo private'), ('echo public'), ('echo unlisted')$$, 'a member reads every acme file');
select tests.act_as_user('stranger');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo public')$$, 'a stranger reads only the public acme tool''s file');
select tests.act_as_user('service_role');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo private'), ('echo public'), ('echo unlisted')$$, 'service_role reads every acme file');

-- insert (the version id is looked up as each role sees it; a nil uuid would do as well)
select tests.act_as_user('anon');
select throws_ok($$insert into tool_version_files (version_id, path, content_text)
                   values ('00000000-0000-0000-0000-000000000000', 'extra.sh', 'rm -rf /')$$,
  '42501', 'permission denied for table tool_version_files', 'anon cannot add a file');
select tests.act_as_user('owner');
select throws_ok($$insert into tool_version_files (version_id, path, content_text)
                   select v.id, 'extra.sh', 'rm -rf /' from tool_versions v where v.manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_version_files', 'the owner cannot add a file to a published version');
select tests.act_as_user('member');
select throws_ok($$insert into tool_version_files (version_id, path, content_text)
                   select v.id, 'extra.sh', 'rm -rf /' from tool_versions v where v.manifest ->> 'tool_id' = 'acme/private_tool'$$,
  '42501', 'permission denied for table tool_version_files', 'a member cannot add a file to a published version');
select tests.act_as_user('stranger');
select throws_ok($$insert into tool_version_files (version_id, path, content_text)
                   select v.id, 'extra.sh', 'rm -rf /' from tool_versions v where v.manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '42501', 'permission denied for table tool_version_files', 'a stranger cannot add a file');
select tests.act_as_user('service_role');
select throws_ok($$insert into tool_version_files (version_id, path, content_text)
                   select v.id, '../escape.sh', 'x' from tool_versions v where v.manifest ->> 'tool_id' = 'acme/public_tool'$$,
  '23514', 'new row for relation "tool_version_files" violates check constraint "path_is_safe"',
  'service_role cannot add a file whose path leaves the tool''s directory');
select lives_ok($$insert into tool_version_files (version_id, path, content_text)
                  select v.id, 'extra.sh', 'echo extra' from tool_versions v where v.manifest ->> 'tool_id' = 'acme/public_tool'$$,
  'service_role may insert a file row directly');
select throws_like($$set constraints all immediate$$,
  'content_hash of acme/public_tool@1.0.0 does not match its manifest and files%',
  'but a file added to a published version breaks its content_hash, which is refused at commit');

-- update
select tests.act_as_user('anon');
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'anon cannot change a file');
select tests.act_as_user('owner');
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'the owner cannot change a published file');
select tests.act_as_user('member');
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo private'$$,
  '42501', 'permission denied for table tool_version_files', 'a member cannot change a published file');
select tests.act_as_user('stranger');
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'a stranger cannot change a file');
select tests.act_as_user('service_role');
select throws_ok($$update tool_version_files set content_text = 'rm -rf /' where content_text = 'echo public'$$,
  '23514', 'file "main.sh" of a published version is immutable',
  'service_role cannot change a published file: the trigger refuses it');
select throws_ok($$update tool_version_files set is_entrypoint = false where content_text = 'echo public'$$,
  '23514', 'file "main.sh" of a published version is immutable',
  'service_role cannot change a published file''s metadata either');

-- delete
select tests.act_as_user('anon');
select throws_ok($$delete from tool_version_files where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'anon cannot delete a file');
select tests.act_as_user('owner');
select throws_ok($$delete from tool_version_files where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'the owner cannot delete a published file');
select tests.act_as_user('member');
select throws_ok($$delete from tool_version_files where content_text = 'echo private'$$,
  '42501', 'permission denied for table tool_version_files', 'a member cannot delete a published file');
select tests.act_as_user('stranger');
select throws_ok($$delete from tool_version_files where content_text = 'echo public'$$,
  '42501', 'permission denied for table tool_version_files', 'a stranger cannot delete a file');
select tests.act_as_user('service_role');
select throws_ok($$delete from tool_version_files where content_text = 'echo public'$$,
  '23514', 'file "main.sh" of a published version cannot be deleted',
  'service_role cannot delete a published file: the trigger refuses it');

-- what is left, seen as admin
select tests.act_as_admin();
select results_eq($$select content_text, is_entrypoint, sha256 = encode(sha256(convert_to(content_text, 'UTF8')), 'hex')
                      from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo private', true, true), ('echo public', true, true), ('echo unlisted', true, true)$$,
  'every acme file is as published');

-- files follow their tool: a member who leaves stops reading private files
delete from namespace_members where namespace = 'acme' and user_id = tests.member_id();
select tests.act_as_user('member');
select results_eq($$select content_text from tool_version_files where content_text like 'echo %' and path = 'main.sh' order by 1$$,
  $$values ('echo public')$$, 'a former member reads only the public acme tool''s file');
select tests.act_as_user('owner');
select is((select count(*)::int from tool_version_files where content_text = 'echo private'), 1,
  'the owner still reads the private file');
select tests.act_as_admin();
select is((select count(*)::int from tool_version_files where content_text = 'echo private'), 1,
  'postgres reads the private file');

select * from finish();
rollback;
