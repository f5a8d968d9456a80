-- Who published a version: an admin (kiwi_internal.caller_is_admin(): service_role, the
-- dashboard's postgres), or a user spending an admin's approval of exactly that content
-- (publish_tool_version(..., p_approval_id)), is trusted with what only an admin may
-- decide: widening a sandbox (20261128000300_sandbox_narrowing.sql) and reading the
-- runner's environment (20261128000200_secret_grants.sql). Everyone else's version may
-- only narrow what its executor chain allows. Set once, by publish
-- (20261128000400_publish_trust.sql), and never changed: a version stays as trusted as
-- it was when it was published.

alter table public.tool_versions add column admin_published boolean not null default false;
comment on column public.tool_versions.admin_published is
  'Published by an admin, or with an admin''s approval of this content: may widen the sandbox and read variables of the runner''s environment its chain does not. Set by publish, never changed.';

-- anon reads every column but published_by (20261121000900_tool_versions.sql): this one too
grant select (admin_published) on table public.tool_versions to anon;

-- Versions published before this column: publish records auth.uid() as published_by, so a
-- version without one was published by an admin (service_role, the SQL editor, the seed);
-- a user's is admin_published when an admin's approval of its very content was spent on it.
update public.tool_versions v
   set admin_published = true
  from public.tools t
 where t.id = v.tool_uuid
   and (v.published_by is null
        or exists (select 1 from public.approvals a
                    where a.policy = 'command write' and a.status = 'used'
                      and a.tool_id = t.ref and a.content_hash = v.content_hash));

create function kiwi_internal.tool_versions_admin_published_immutable() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  if new.admin_published is distinct from old.admin_published then
    raise exception 'published version % is immutable: admin_published is set when it is published', old.version
      using errcode = '23514', hint = 'publish a new version instead (an admin, or with an admin''s approval)';
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.tool_versions_admin_published_immutable() from public;
create trigger tool_versions_admin_published_immutable
  before update of admin_published on public.tool_versions
  for each row execute function kiwi_internal.tool_versions_admin_published_immutable();
