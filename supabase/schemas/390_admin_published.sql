-- Who published a version: an admin (kiwi_internal.caller_is_admin(): service_role, the
-- dashboard's postgres), or a user spending an admin's approval of exactly that content
-- (publish_tool_version(..., p_approval_id)), is trusted with what only an admin may
-- decide: widening a sandbox (410_sandbox_narrowing.sql) and reading the
-- runner's environment (400_secret_grants.sql). Everyone else's version may
-- only narrow what its executor chain allows. Set once, by publish
-- (430_publish_trust.sql), and never changed: a version stays as trusted as
-- it was when it was published.

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
