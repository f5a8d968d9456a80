-- Shared by every pgTAP file (\ir ../_setup.sql inside its transaction, so all of it is
-- rolled back): pgTAP itself, role switching as PostgREST does it, and fixtures.
create extension if not exists pgtap with schema extensions;
set local search_path = public, extensions, tests;

create schema tests;
grant usage on schema tests to anon, authenticated, service_role;

-- Act as a PostgREST caller: the role, and the JWT claims auth.uid() reads.
create function tests.act_as(p_role text, p_user uuid default null) returns void
  language plpgsql as $$
begin
  perform set_config('request.jwt.claims',
                     jsonb_strip_nulls(jsonb_build_object('role', p_role, 'sub', p_user))::text, true);
  perform set_config('role', p_role, true);
end $$;

-- Back to the session's own (superuser) role, as the dashboard SQL editor is.
create function tests.act_as_admin() returns void
  language plpgsql as $$
begin
  perform set_config('role', 'none', true);
  perform set_config('request.jwt.claims', '', true);
end $$;

create function tests.owner_id() returns uuid language sql immutable as $$ select '00000000-0000-4000-8000-00000000000a'::uuid $$;
create function tests.member_id() returns uuid language sql immutable as $$ select '00000000-0000-4000-8000-00000000000b'::uuid $$;
create function tests.stranger_id() returns uuid language sql immutable as $$ select '00000000-0000-4000-8000-00000000000c'::uuid $$;

-- Named callers: anon, owner, member, stranger, service_role.
create function tests.act_as_user(p_who text) returns void
  language plpgsql as $$
begin
  case p_who
    when 'anon' then perform tests.act_as('anon');
    when 'owner' then perform tests.act_as('authenticated', tests.owner_id());
    when 'member' then perform tests.act_as('authenticated', tests.member_id());
    when 'stranger' then perform tests.act_as('authenticated', tests.stranger_id());
    when 'service_role' then perform tests.act_as('service_role');
    else raise exception 'unknown caller %', p_who;
  end case;
end $$;

grant execute on all functions in schema tests to anon, authenticated, service_role;

-- A namespace `acme` (owner + member) holding one public, one unlisted and one
-- private script, each with a file.
create function tests.make_acme() returns void
  language plpgsql as $$
declare
  v_vis text;
begin
  insert into public.namespaces (namespace, display_name, owner_id) values ('acme', 'Acme', tests.owner_id());
  insert into public.namespace_members (namespace, user_id, role) values ('acme', tests.member_id(), 'member');
  foreach v_vis in array array['public', 'unlisted', 'private'] loop
    perform public.publish_tool_version(
      jsonb_build_object('tool_id', 'acme/' || v_vis || '_tool', 'tool_type', 'script',
                         'executor', 'bash_runtime', 'version', '1.0.0', 'visibility', v_vis,
                         'description', 'acme ' || v_vis || ' tool', 'tags', jsonb_build_array('acme')),
      jsonb_build_array(jsonb_build_object('path', 'main.sh', 'content_text', 'echo ' || v_vis)));
  end loop;
end $$;

-- Plant a tool and its latest version without triggers or foreign keys, as a bad
-- restore or a manual edit could: for testing what resolution does with data that
-- the write path would have refused. Superuser only (session_replication_role).
create function tests.force_tool(p_tool_id text, p_tool_type text, p_executor text) returns void
  language plpgsql as $$
declare
  v_id uuid := gen_random_uuid();
  v_manifest jsonb := jsonb_strip_nulls(jsonb_build_object(
    'tool_id', p_tool_id, 'tool_type', p_tool_type, 'executor', p_executor, 'version', '1.0.0'));
begin
  set local session_replication_role = replica;
  insert into public.tools (id, tool_id, tool_type, executor_id, name, latest_version)
  values (v_id, p_tool_id, p_tool_type, p_executor, p_tool_id, '1.0.0');
  insert into public.tool_versions (tool_uuid, version, executor_id, manifest, content_hash, is_latest)
  values (v_id, '1.0.0', p_executor, v_manifest, kiwi_internal.content_hash(v_manifest, '[]'), true);
  set local session_replication_role = origin;
end $$;

-- Publish a tool in one line (a script gets a one-line main.sh).
-- Published public, as a test's tools were before a namespace's default became private: a
-- test that wants another visibility publishes through publish_tool_version itself.
create function tests.publish(p_tool_id text, p_tool_type text, p_executor text,
                              p_version text default '1.0.0', p_config jsonb default '{}')
  returns jsonb
  language sql as $$
  select public.publish_tool_version(
    jsonb_strip_nulls(jsonb_build_object(
      'tool_id', p_tool_id, 'tool_type', p_tool_type, 'executor', p_executor,
      'version', p_version, 'config', p_config, 'visibility', 'public')),
    case when p_tool_type = 'script'
         then '[{"path": "main.sh", "content_text": "echo ok"}]'::jsonb else '[]'::jsonb end)
$$;
