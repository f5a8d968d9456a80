-- tool_version_files: a version's files. The database computes sha256 and size_bytes
-- from content_text and refuses any that disagree; paths stay inside the tool's
-- directory; and at commit every version's content_hash is checked against its
-- manifest and files, so files can be neither added, changed nor dropped afterwards.

-- A relative path that cannot escape its directory: no leading '/', no '.', '..' or
-- empty segments, no backslashes, colons (drive letters) or control characters
-- (NUL cannot occur in PostgreSQL text at all).
create function kiwi_internal.is_safe_path(p_path text) returns boolean
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select p_path <> ''
     and length(p_path) <= 1024
     and p_path !~ '[\x01-\x1f\x7f\\:]'
     and not exists (select 1 from unnest(string_to_array(p_path, '/')) s(seg)
                      where s.seg in ('', '.', '..'))
$$;
revoke execute on function kiwi_internal.is_safe_path(text) from public;
grant execute on function kiwi_internal.is_safe_path(text) to anon, authenticated, service_role;

create function kiwi_internal.guess_media_type(p_path text) returns text
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select case lower(substring(p_path from '\.([^./]+)$'))
    when 'py' then 'text/x-python'
    when 'sh' then 'text/x-shellscript'
    when 'bash' then 'text/x-shellscript'
    when 'js' then 'text/javascript'
    when 'mjs' then 'text/javascript'
    when 'cjs' then 'text/javascript'
    when 'ts' then 'text/typescript'
    when 'json' then 'application/json'
    when 'yaml' then 'application/yaml'
    when 'yml' then 'application/yaml'
    when 'toml' then 'application/toml'
    when 'md' then 'text/markdown'
    when 'txt' then 'text/plain'
    when 'sql' then 'application/sql'
    when 'html' then 'text/html'
    when 'xml' then 'application/xml'
    else 'text/plain'
  end
$$;
revoke execute on function kiwi_internal.guess_media_type(text) from public;
grant execute on function kiwi_internal.guess_media_type(text) to anon, authenticated, service_role;

create table public.tool_version_files (
  version_id    uuid not null references public.tool_versions (id) on delete cascade,
  path          text not null
                constraint path_is_safe check (kiwi_internal.is_safe_path(path)),
  media_type    text not null,
  sha256        text not null constraint sha256_format check (sha256 ~ '^[0-9a-f]{64}$'),
  size_bytes    bigint not null constraint size_not_negative check (size_bytes >= 0),
  is_entrypoint boolean not null default false,
  content_text  text,
  storage_key   text,
  created_at    timestamptz not null default now(),
  primary key (version_id, path),
  constraint content_or_storage check (num_nonnulls(content_text, storage_key) = 1),
  constraint sha256_matches_content check (content_text is null or sha256 = kiwi_internal.sha256_hex(content_text)),
  constraint size_matches_content check (content_text is null or size_bytes = octet_length(content_text))
);
comment on table public.tool_version_files is
  'Files of a version: content in content_text (hashed by the database) or in storage under storage_key.';

alter table public.tool_version_files enable row level security;
revoke all on table public.tool_version_files from public, anon, authenticated;
grant select on table public.tool_version_files to anon, authenticated;
grant all on table public.tool_version_files to service_role;

create unique index tool_version_files_one_entrypoint_idx
  on public.tool_version_files (version_id) where is_entrypoint;

create policy "files are readable with their version"
  on public.tool_version_files for select to anon, authenticated
  using (exists (select 1 from public.tool_versions v where v.id = version_id));

create function kiwi_internal.files_before_insert() returns trigger
  language plpgsql
  set search_path = ''
as $$
declare
  v_sha256 text;
begin
  if new.content_text is not null then
    v_sha256 := kiwi_internal.sha256_hex(new.content_text);
    if new.sha256 is not null and new.sha256 <> v_sha256 then
      raise exception 'file "%": sha256 % does not match its content (%)', new.path, new.sha256, v_sha256
        using errcode = '23514';
    end if;
    new.sha256 := v_sha256;
    new.size_bytes := octet_length(new.content_text);
  elsif new.storage_key is not null and (new.sha256 is null or new.size_bytes is null) then
    raise exception 'file "%" is kept in storage: its sha256 and size_bytes must be given', new.path
      using errcode = '23502';
  end if;
  new.media_type := coalesce(new.media_type, kiwi_internal.guess_media_type(new.path));
  return new;
end
$$;
revoke execute on function kiwi_internal.files_before_insert() from public;
create trigger files_before_insert
  before insert on public.tool_version_files
  for each row execute function kiwi_internal.files_before_insert();

create function kiwi_internal.files_immutable() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  if tg_op = 'DELETE' then
    if pg_trigger_depth() = 1 then
      raise exception 'file "%" of a published version cannot be deleted', old.path
        using errcode = '23514', hint = 'publish a new version without it';
    end if;
    return old;
  end if;
  raise exception 'file "%" of a published version is immutable', old.path
    using errcode = '23514', hint = 'publish a new version instead';
end
$$;
revoke execute on function kiwi_internal.files_immutable() from public;
create trigger files_immutable
  before update or delete on public.tool_version_files
  for each row execute function kiwi_internal.files_immutable();

-- At commit: a version's stored content_hash must equal the hash of its manifest and
-- files as they now are. This is what makes a version and its files one unit.
create function kiwi_internal.verify_content_hash() returns trigger
  language plpgsql security definer
  set search_path = ''
as $$
declare
  v_version_id uuid;
  v_row record;
begin
  if tg_table_name = 'tool_versions' then
    v_version_id := new.id;
  else
    v_version_id := new.version_id;
  end if;
  select v.content_hash as stored, t.ref, v.version,
         kiwi_internal.content_hash(v.manifest, coalesce((
           select jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256))
             from public.tool_version_files f where f.version_id = v.id), '[]')) as computed
    into v_row
    from public.tool_versions v join public.tools t on t.id = v.tool_uuid
   where v.id = v_version_id;
  if found and v_row.stored <> v_row.computed then
    raise exception 'content_hash of %@% does not match its manifest and files (stored %, computed %)',
      v_row.ref, v_row.version, v_row.stored, v_row.computed
      using errcode = '23514', hint = 'publish through publish_tool_version, which computes it';
  end if;
  return null;
end
$$;
revoke execute on function kiwi_internal.verify_content_hash() from public;
create constraint trigger tool_versions_verify_content_hash
  after insert on public.tool_versions
  deferrable initially deferred
  for each row execute function kiwi_internal.verify_content_hash();
create constraint trigger files_verify_content_hash
  after insert on public.tool_version_files
  deferrable initially deferred
  for each row execute function kiwi_internal.verify_content_hash();
