-- tool_versions: immutable published versions. Only deprecation and yanking change
-- after publishing; is_latest always marks the highest non-yanked semver.

-- The JSON Schema form of a manifest's parameters. A list
-- [{name, type, required, description, default, enum}] becomes an object schema that
-- refuses unknown parameters; an object is taken as the schema itself.
create function kiwi_internal.parameters_schema(p_parameters jsonb) returns jsonb
  language sql immutable parallel safe
  set search_path = ''
as $$
  select case jsonb_typeof(p_parameters)
    when 'object' then p_parameters
    when 'array' then jsonb_build_object(
      'type', 'object',
      'properties', coalesce((
        select jsonb_object_agg(p ->> 'name',
                 jsonb_strip_nulls(jsonb_build_object(
                   'type', coalesce(p -> 'type', '"string"'),
                   'description', p -> 'description',
                   'default', p -> 'default',
                   'enum', p -> 'enum',
                   'items', p -> 'items')))
          from jsonb_array_elements(p_parameters) p), '{}'::jsonb),
      'required', coalesce((
        select jsonb_agg(p ->> 'name' order by ord)
          from jsonb_array_elements(p_parameters) with ordinality as a(p, ord)
         where (p ->> 'required')::boolean is true), '[]'::jsonb),
      'additionalProperties', false)
    else '{"type": "object", "properties": {}}'::jsonb
  end
$$;
revoke execute on function kiwi_internal.parameters_schema(jsonb) from public;
grant execute on function kiwi_internal.parameters_schema(jsonb) to anon, authenticated, service_role;

create table public.tool_versions (
  id                  uuid primary key default gen_random_uuid(),
  tool_uuid           uuid not null references public.tools (id) on delete cascade,
  version             text not null constraint version_is_semver check (kiwi_internal.is_semver(version)),
  semver_key          text[] collate "C" generated always as (kiwi_internal.semver_key(version)) stored,
  executor_id         text references public.tools (ref) on update restrict on delete restrict,
  manifest            jsonb not null constraint manifest_is_object check (jsonb_typeof(manifest) = 'object'),
  manifest_yaml       text,
  parameters_schema   jsonb generated always as (kiwi_internal.parameters_schema(manifest -> 'parameters')) stored,
  content_hash        text not null constraint content_hash_format check (content_hash ~ '^[0-9a-f]{64}$'),
  changelog           text,
  is_latest           boolean not null default false,
  is_deprecated       boolean not null default false,
  deprecation_message text,
  is_yanked           boolean not null default false,
  yanked_reason       text,
  yanked_at           timestamptz,
  published_by        uuid,
  published_at        timestamptz not null default now(),
  admin_published     boolean not null default false,  -- set by publish, never changed (admin_published.sql)
  constraint tool_versions_tool_version_key unique (tool_uuid, version),
  constraint manifest_version_matches check (manifest ->> 'version' = version)
);
comment on table public.tool_versions is
  'Published versions, immutable but for deprecation and yanking. is_latest marks the highest non-yanked semver.';
comment on column public.tool_versions.content_hash is
  'SHA-256 over the canonical manifest and the files'' paths and sha256s; see kiwi_internal.content_hash.';

alter table public.tool_versions enable row level security;
revoke all on table public.tool_versions from public, anon, authenticated;
-- anon reads every column but published_by, a user id (see 040_namespaces.sql)
grant select (id, tool_uuid, version, semver_key, executor_id, manifest, manifest_yaml, parameters_schema,
              content_hash, changelog, is_latest, is_deprecated, deprecation_message, is_yanked,
              yanked_reason, yanked_at, published_at, admin_published)
  on table public.tool_versions to anon;
grant select on table public.tool_versions to authenticated;
grant all on table public.tool_versions to service_role;
comment on column public.tool_versions.admin_published is
  'Published by an admin, or with an admin''s approval of this content: may widen the sandbox and read variables of the runner''s environment its chain does not. Set by publish, never changed.';

create unique index tool_versions_one_latest_idx on public.tool_versions (tool_uuid) where is_latest;
create index tool_versions_executor_id_idx on public.tool_versions (executor_id);
create index tool_versions_content_hash_idx on public.tool_versions (content_hash);

create policy "versions are readable with their tool"
  on public.tool_versions for select to anon, authenticated
  using (exists (select 1 from public.tools t where t.id = tool_uuid));

-- Moves is_latest to the highest non-yanked semver and copies that version's
-- descriptive fields onto the tool (whose trigger indexes them for search). Called
-- after every insert and (un)yank.
create function kiwi_internal.refresh_latest(p_tool_uuid uuid) returns void
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_best public.tool_versions;
begin
  select * into v_best from public.tool_versions v
   where v.tool_uuid = p_tool_uuid and not v.is_yanked
   order by v.semver_key desc
   limit 1;
  -- Two statements, old mark off first: the partial unique index is checked per row.
  update public.tool_versions set is_latest = false
   where tool_uuid = p_tool_uuid and is_latest and id is distinct from v_best.id;
  if v_best.id is null then
    update public.tools set latest_version = null where id = p_tool_uuid;
    return;
  end if;
  update public.tool_versions set is_latest = true where id = v_best.id and not is_latest;
  update public.tools t set
    latest_version = v_best.version,
    executor_id    = v_best.executor_id,
    name           = coalesce(v_best.manifest ->> 'name', t.tool_id),
    description    = coalesce(v_best.manifest ->> 'description', ''),
    category       = v_best.manifest ->> 'category',
    subcategory    = v_best.manifest ->> 'subcategory',
    tags           = coalesce((select array_agg(x) from jsonb_array_elements_text(v_best.manifest -> 'tags') x), '{}'),
    -- the default as publish gives it: public in `public`, private in anyone's own namespace
    visibility     = coalesce(v_best.manifest ->> 'visibility', case when t.namespace = 'public' then 'public'
                                                                     else 'private' end)
   where t.id = p_tool_uuid;
end
$$;
revoke execute on function kiwi_internal.refresh_latest(uuid) from public;
-- Triggers run as the writer: service_role writes tables directly.
grant execute on function kiwi_internal.refresh_latest(uuid) to service_role;

create function kiwi_internal.tool_versions_before_insert() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_tool public.tools;
begin
  select * into v_tool from public.tools t where t.id = new.tool_uuid;
  if (new.manifest ->> 'tool_type') is distinct from v_tool.tool_type then
    raise exception 'version % of tool "%" says tool_type %, but the tool is a %',
      new.version, v_tool.ref, coalesce(new.manifest ->> 'tool_type', 'null'), v_tool.tool_type
      using errcode = '23514';
  end if;
  perform kiwi_internal.check_executor(v_tool.ref, v_tool.tool_type, new.executor_id);
  new.is_latest := false;  -- refresh_latest decides
  return new;
end
$$;
revoke execute on function kiwi_internal.tool_versions_before_insert() from public;
create trigger tool_versions_before_insert
  before insert on public.tool_versions
  for each row execute function kiwi_internal.tool_versions_before_insert();

create function kiwi_internal.tool_versions_immutable() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  if tg_op = 'DELETE' then
    -- Reached only directly: removing the whole tool cascades from a trigger depth > 1.
    if pg_trigger_depth() = 1 then
      raise exception 'published version % cannot be deleted', old.version
        using errcode = '23514', hint = 'yank it (yank_tool_version) so that it is no longer installed, or remove the whole tool';
    end if;
    return old;
  end if;
  if (new.id, new.tool_uuid, new.version, new.executor_id, new.manifest, new.manifest_yaml,
      new.content_hash, new.changelog, new.published_by, new.published_at)
     is distinct from
     (old.id, old.tool_uuid, old.version, old.executor_id, old.manifest, old.manifest_yaml,
      old.content_hash, old.changelog, old.published_by, old.published_at) then
    raise exception 'published version % is immutable: only deprecation and yanking may change', old.version
      using errcode = '23514', hint = 'publish a new version instead';
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.tool_versions_immutable() from public;
create trigger tool_versions_immutable
  before update or delete on public.tool_versions
  for each row execute function kiwi_internal.tool_versions_immutable();

create function kiwi_internal.tool_versions_after_change() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  perform kiwi_internal.refresh_latest(new.tool_uuid);
  return null;
end
$$;
revoke execute on function kiwi_internal.tool_versions_after_change() from public;
create trigger tool_versions_after_insert
  after insert on public.tool_versions
  for each row execute function kiwi_internal.tool_versions_after_change();
create trigger tool_versions_after_yank
  after update of is_yanked on public.tool_versions
  for each row when (new.is_yanked is distinct from old.is_yanked)
  execute function kiwi_internal.tool_versions_after_change();
