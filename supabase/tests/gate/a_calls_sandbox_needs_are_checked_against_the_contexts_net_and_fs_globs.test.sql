-- What the sandbox of a tool reaches is part of what a call needs of its context: admit_call
-- checks its network entries against the context's net globs, its read-only paths against
-- fs_read or fs_write, its read-write paths against fs_write, refusing the first it lacks as
-- permission_denied before anything is counted (runner/policy/permissions.py sends them).
begin;
\ir ../_setup.sql
\ir ../rls/_helpers.sql
select plan(7);

select public.publish_tool_version(
  '{"tool_id": "sbx_gate", "tool_type": "directive", "executor": "directive_runtime", "version": "1.0.0",
    "entrypoint": "d.md", "permissions": {"tools": ["hello_world"], "net": ["127.0.0.1:*"], "fs_write": ["out/**"]}}',
  '[{"path": "d.md", "content_text": "# gate\n"}]');

create function tests.admit(p jsonb) returns jsonb language sql as $$
  select public.admit_call(jsonb_build_object('params_sha256', repeat('a', 64), 'session_id', 's-sbx', 'tool_id', 'hello_world') || p)
$$;
grant execute on function tests.admit(jsonb) to anon, authenticated, service_role;
create temp table ctx (id uuid);
grant all on ctx to anon, authenticated, service_role;

select tests.act_as_user('owner');
insert into ctx (id) select (public.open_context('s-sbx', 'sbx_gate') ->> 'id')::uuid;

select is(tests.admit(jsonb_build_object('context_id', (select id from ctx),
            'needs', '{"tools": ["hello_world"], "net": ["127.0.0.1:8080"]}'::jsonb)) ->> 'allowed',
  'true', 'a host the context''s net globs cover is allowed');
select is(tests.admit(jsonb_build_object('context_id', (select id from ctx),
            'needs', '{"tools": ["hello_world"], "net": ["127.0.0.1:8080", "api.example.com:443"]}'::jsonb)) ->> 'permission',
  'net: api.example.com:443 is not allowed by ["127.0.0.1:*"]', 'a host they do not cover is refused, naming it');
select is(tests.admit(jsonb_build_object('context_id', (select id from ctx),
            'needs', '{"tools": ["hello_world"], "fs_read": ["out/cache"], "fs_write": ["out/new"]}'::jsonb)) ->> 'allowed',
  'true', 'a path mounted read-only is covered by fs_write too');
select is(tests.admit(jsonb_build_object('context_id', (select id from ctx),
            'needs', '{"tools": ["hello_world"], "fs_read": ["/srv/data"]}'::jsonb)) ->> 'permission',
  'fs_read: /srv/data is not allowed by []', 'a path neither fs_read nor fs_write covers is refused');
select is(tests.admit(jsonb_build_object('context_id', (select id from ctx),
            'needs', '{"tools": ["hello_world"], "fs_write": ["${KIWI_OUT:-out}"]}'::jsonb)) ->> 'permission',
  'fs_write: ${KIWI_OUT:-out} is not allowed by ["out/**"]', 'a path is compared as written');

-- the session's default context reaches any host; a child narrowed to none, none
select is(tests.admit(jsonb_build_object('context_id', (public.open_context('s-sbx') ->> 'id'),
            'needs', '{"tools": ["hello_world"], "net": ["api.example.com:443"]}'::jsonb)) ->> 'allowed',
  'true', 'the session''s default context reaches any host');
select is(tests.admit(jsonb_build_object('context_id',
            (public.open_context('s-sbx', null, (select id from ctx), '{"net": []}') ->> 'id'),
            'needs', '{"tools": ["hello_world"], "net": ["127.0.0.1:8080"]}'::jsonb)) ->> 'permission',
  'net: 127.0.0.1:8080 is not allowed by []', 'a child narrowed to no net reaches no host');

select * from finish();
rollback;
