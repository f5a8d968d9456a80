-- Quotas per user and per namespace, as rows a Supabase project can change (update
-- registry_quotas set value = 50 where name = 'namespaces_per_user'). One user made 100
-- namespaces and 45 MB of versions in 4 seconds: nothing bounded how much one tenant keeps.
-- registry_limits (140_registry_limits.sql) bounds one version; these bound how
-- many of them, and how much in all:
--
--   namespaces_per_user   20        namespaces one user owns (namespaces.owner_id), checked
--                                   when a namespace is created
--   tools_per_namespace   1000      checked when a publish creates a tool
--   versions_per_tool     1000      checked when a publish adds a version
--   namespace_bytes       100 MiB   all versions of a namespace's tools together: files,
--   user_bytes            250 MiB   manifests and tool.yaml; and all versions one user published
--   open_runs_per_caller  1000      queued runs one caller has open (queued, running, retrying,
--                                   waiting for approval), checked by enqueue_run
--                                   (560_run_queue.sql): one tenant cannot flood the queue
--
-- A refusal (PT422: the runner's Refused) names the quota, its value and the row that sets
-- it: "quota 'namespaces per user' (20) reached: you own 20 namespaces
-- (registry_quotas.namespaces_per_user)". A deleted row lifts its quota. Admins
-- (kiwi_internal.caller_is_admin: service_role, or a login that bypasses RLS) are exempt:
-- they publish the platform's tools and the seed, and they set the quotas. What an admin
-- publishes still counts towards the namespace's bytes.
--
-- Bytes are counted per version as it is written (kiwi_internal.version_usage, kept by
-- triggers on tool_versions and tool_version_files, so every write path counts, and a
-- removed tool's versions stop counting with them). A publish that counts takes, after its
-- tool's lock, a lock on its user and then on its namespace, so two concurrent publishes
-- cannot both pass the last free place; creating a namespace takes the user's lock.

create table public.registry_quotas (
  name        text primary key
              constraint name_format check (name ~ '^[a-z][a-z0-9_]*$'),
  value       bigint not null constraint value_not_negative check (value >= 0),
  label       text not null,   -- how a refusal names it: 'namespaces per user'
  description text not null,
  updated_at  timestamptz not null default now()
);
comment on table public.registry_quotas is
  'How much one user or namespace may keep (namespaces, tools, versions, bytes). Checked at namespace creation and publish for everyone but admins; changed by service_role. A deleted row lifts its quota.';

alter table public.registry_quotas enable row level security;
revoke all on table public.registry_quotas from public, anon, authenticated;
grant select on table public.registry_quotas to anon, authenticated;
grant select, insert, update, delete on table public.registry_quotas to service_role;

create policy "anyone reads the registry quotas"
  on public.registry_quotas for select to anon, authenticated
  using (true);

create trigger registry_quotas_touch
  before update on public.registry_quotas
  for each row execute function kiwi_internal.registry_limits_touch();

insert into public.registry_quotas (name, value, label, description) values
  ('namespaces_per_user', 20, 'namespaces per user', 'namespaces one user owns'),
  ('tools_per_namespace', 1000, 'tools per namespace', 'tools in one namespace'),
  ('versions_per_tool', 1000, 'versions per tool', 'versions of one tool, yanked ones included'),
  ('namespace_bytes', 104857600, 'bytes per namespace',
   'bytes of all versions of a namespace''s tools: files, manifests (as JSON) and tool.yaml'),
  ('user_bytes', 262144000, 'bytes per user',
   'bytes of all versions one user published, in every namespace: files, manifests (as JSON) and tool.yaml'),
  ('open_runs_per_caller', 1000, 'open runs per caller',
   'queued runs one caller has open at once (queued, running, retrying or waiting for approval), checked by enqueue_run');

-- The bytes each version holds: its files, its manifest as JSON and its tool.yaml.
create table kiwi_internal.version_usage (
  version_id uuid primary key references public.tool_versions (id) on delete cascade,
  namespace  text not null,
  user_id    uuid,
  bytes      bigint not null
);
revoke all on table kiwi_internal.version_usage from public, anon, authenticated, service_role;
grant select on table kiwi_internal.version_usage to service_role;
create index version_usage_namespace_idx on kiwi_internal.version_usage (namespace);
create index version_usage_user_id_idx on kiwi_internal.version_usage (user_id);

create index namespaces_owner_id_idx on public.namespaces (owner_id);

create function kiwi_internal.version_usage_of_version() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  insert into kiwi_internal.version_usage (version_id, namespace, user_id, bytes)
  select new.id, t.namespace, new.published_by,
         octet_length(new.manifest::text) + coalesce(octet_length(new.manifest_yaml), 0)
    from public.tools t where t.id = new.tool_uuid;
  return null;
end
$$;
revoke execute on function kiwi_internal.version_usage_of_version() from public;
create trigger tool_versions_usage
  after insert on public.tool_versions
  for each row execute function kiwi_internal.version_usage_of_version();

create function kiwi_internal.version_usage_of_files() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
begin
  update kiwi_internal.version_usage u set bytes = u.bytes + f.bytes
    from (select a.version_id, sum(a.size_bytes) as bytes from added a group by a.version_id) f
   where u.version_id = f.version_id;
  return null;
end
$$;
revoke execute on function kiwi_internal.version_usage_of_files() from public;
create trigger tool_version_files_usage
  after insert on public.tool_version_files
  referencing new table as added
  for each statement execute function kiwi_internal.version_usage_of_files();

-- Refuse because quota p_name is reached: p_what says what the caller holds.
create function kiwi_internal.refuse_quota(p_name text, p_what text) returns void
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_quota public.registry_quotas;
begin
  select * into v_quota from public.registry_quotas q where q.name = p_name;
  raise exception 'quota ''%'' (%) reached: % (registry_quotas.%)', v_quota.label, v_quota.value, p_what, p_name
    using errcode = 'PT422',
          hint = format('remove what you no longer need, or ask an admin to raise it (update registry_quotas set value = ... where name = %L)',
                        p_name);
end
$$;
revoke execute on function kiwi_internal.refuse_quota(text, text) from public;

-- A quota's value; null when its row is gone (no quota).
create function kiwi_internal.quota(p_name text) returns bigint
  language sql stable
  set search_path = ''
as $$
  select q.value from public.registry_quotas q where q.name = p_name
$$;
revoke execute on function kiwi_internal.quota(text) from public;

-- Namespaces per user, as a namespace is created by anyone but an admin.
create function kiwi_internal.namespaces_quota() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_uid   uuid := auth.uid();
  v_owned bigint;
begin
  if kiwi_internal.caller_is_admin() or v_uid is null then
    return new;   -- admins are exempt; RLS refuses anyone else without a user
  end if;
  perform pg_advisory_xact_lock(hashtext('kiwi.quota.user'), hashtext(v_uid::text));
  select count(*) into v_owned from public.namespaces n where n.owner_id = v_uid;
  if v_owned >= kiwi_internal.quota('namespaces_per_user') then
    perform kiwi_internal.refuse_quota('namespaces_per_user', format('you own %s namespaces', v_owned));
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.namespaces_quota() from public;
create trigger namespaces_quota
  before insert on public.namespaces
  for each row execute function kiwi_internal.namespaces_quota();

-- The quotas a publish of p_version of tool p_ref into p_ns by anyone but an admin must
-- stay within: tools per namespace (a new tool), versions per tool (a new version), bytes
-- per namespace and per user (p_manifest as stored, its p_files as planned, p_yaml). A
-- version that is already published (publish answers unchanged, or refuses other content)
-- takes nothing. Called by kiwi_internal.publish (430_publish_trust.sql) after
-- its tool's lock.
create function kiwi_internal.check_publish_quotas(p_ns text, p_ref text, p_version text, p_manifest jsonb,
                                                   p_files jsonb, p_yaml text)
  returns void
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_uid   uuid := auth.uid();
  v_tool  uuid;
  v_count bigint;
  v_used  bigint;
  v_bytes bigint;
begin
  if kiwi_internal.caller_is_admin() then
    return;
  end if;
  if v_uid is not null then
    perform pg_advisory_xact_lock(hashtext('kiwi.quota.user'), hashtext(v_uid::text));
  end if;
  perform pg_advisory_xact_lock(hashtext('kiwi.quota.namespace'), hashtext(p_ns));
  select t.id into v_tool from public.tools t where t.ref = p_ref;
  if v_tool is null then
    select count(*) into v_count from public.tools t where t.namespace = p_ns;
    if v_count >= kiwi_internal.quota('tools_per_namespace') then
      perform kiwi_internal.refuse_quota('tools_per_namespace', format('namespace "%s" holds %s tools', p_ns, v_count));
    end if;
  elsif exists (select 1 from public.tool_versions v where v.tool_uuid = v_tool and v.version = p_version) then
    return;
  else
    select count(*) into v_count from public.tool_versions v where v.tool_uuid = v_tool;
    if v_count >= kiwi_internal.quota('versions_per_tool') then
      perform kiwi_internal.refuse_quota('versions_per_tool', format('tool "%s" has %s versions', p_ref, v_count));
    end if;
  end if;
  v_bytes := octet_length(p_manifest::text) + coalesce(octet_length(p_yaml), 0)
             + coalesce((select sum((f ->> 'size_bytes')::bigint) from jsonb_array_elements(p_files) f), 0);
  select coalesce(sum(u.bytes), 0) into v_used from kiwi_internal.version_usage u where u.namespace = p_ns;
  if v_used + v_bytes > kiwi_internal.quota('namespace_bytes') then
    perform kiwi_internal.refuse_quota('namespace_bytes',
      format('namespace "%s" holds %s bytes and this version adds %s', p_ns, v_used, v_bytes));
  end if;
  if v_uid is not null then
    select coalesce(sum(u.bytes), 0) into v_used from kiwi_internal.version_usage u where u.user_id = v_uid;
    if v_used + v_bytes > kiwi_internal.quota('user_bytes') then
      perform kiwi_internal.refuse_quota('user_bytes',
        format('you published %s bytes and this version adds %s', v_used, v_bytes));
    end if;
  end if;
end
$$;
revoke execute on function kiwi_internal.check_publish_quotas(text, text, text, jsonb, jsonb, text) from public;
