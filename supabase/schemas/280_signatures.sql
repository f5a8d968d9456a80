-- Signatures: a publisher signs a version's content_hash with an Ed25519 key; the
-- registry keeps the signature, the public key and the key's fingerprint beside the
-- version. The registry cannot check Ed25519 itself (no such function in PostgreSQL),
-- and need not: trust is the runner's decision, made with the keys its config.toml
-- trusts for each namespace (runner/trust/). What the registry guarantees is the
-- bookkeeping: a signature names the content_hash it covers, which must be the
-- version's; it is written only by someone who may publish into the tool's namespace;
-- and it never changes afterwards.
--
-- The signed message (documented, so that any client can sign and verify):
--   the UTF-8 bytes of  "kiwi-signature-v1\n" || content_hash
-- public_key is the raw 32-byte Ed25519 key and signature the raw 64-byte signature,
-- both in standard base64; key_fingerprint is the lower-case hex SHA-256 of the raw key.

create table public.tool_version_signatures (
  id              uuid primary key default gen_random_uuid(),
  version_id      uuid not null references public.tool_versions (id) on delete cascade,
  content_hash    text not null
                  constraint tool_version_signatures_content_hash_format check (content_hash ~ '^[0-9a-f]{64}$'),
  algorithm       text not null default 'ed25519'
                  constraint tool_version_signatures_algorithm check (algorithm = 'ed25519'),
  public_key      text not null
                  constraint tool_version_signatures_public_key_format check (public_key ~ '^[A-Za-z0-9+/]{43}=$'),
  key_fingerprint text generated always as (encode(sha256(decode(public_key, 'base64')), 'hex')) stored,
  signature       text not null
                  constraint tool_version_signatures_signature_format check (signature ~ '^[A-Za-z0-9+/]{86}==$'),
  signed_by       uuid,
  signed_at       timestamptz not null default now(),
  constraint tool_version_signatures_one_per_key unique (version_id, key_fingerprint)
);
comment on table public.tool_version_signatures is
  'Ed25519 signatures of versions'' content_hash ("kiwi-signature-v1\n" || content_hash). Written by sign_tool_version or publish_tool_version; never changed.';

alter table public.tool_version_signatures enable row level security;
revoke all on table public.tool_version_signatures from public, anon, authenticated;
-- anon reads every column but signed_by, a user id (see 040_namespaces.sql)
grant select (id, version_id, content_hash, algorithm, public_key, key_fingerprint, signature, signed_at)
  on table public.tool_version_signatures to anon;
grant select on table public.tool_version_signatures to authenticated;
grant all on table public.tool_version_signatures to service_role;
create index tool_version_signatures_fingerprint_idx on public.tool_version_signatures (key_fingerprint);

create policy "signatures are readable with their version"
  on public.tool_version_signatures for select to anon, authenticated
  using (exists (select 1 from public.tool_versions v where v.id = version_id));

-- A signature covers its version's content: checked on every write, including
-- service_role's direct inserts. Signatures never change (delete and sign again).
create function kiwi_internal.signatures_before_write() returns trigger
  language plpgsql
  set search_path = ''
as $$
declare
  v_hash text;
begin
  if tg_op = 'UPDATE' then
    raise exception 'signatures cannot be changed' using errcode = 'PT409',
      hint = 'delete the signature and sign the version again';
  end if;
  select v.content_hash into v_hash from public.tool_versions v where v.id = new.version_id;
  if v_hash is distinct from new.content_hash then
    raise exception 'the signature covers content_hash %, but the version''s content_hash is %',
      new.content_hash, v_hash
      using errcode = 'PT409', hint = 'sign the content_hash the registry holds for this version';
  end if;
  return new;
end
$$;
revoke execute on function kiwi_internal.signatures_before_write() from public;
create trigger signatures_before_write
  before insert or update on public.tool_version_signatures
  for each row execute function kiwi_internal.signatures_before_write();

-- p_signature: {content_hash, public_key, signature}. Idempotent per key: the same key
-- signing the same version again changes nothing.
create function kiwi_internal.add_signature(p_tool_id text, p_version text, p_signature jsonb)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = ''
as $$
declare
  v_ref      text := kiwi_internal.normalize_ref(p_tool_id);
  v_row      record;
  v_key      text := p_signature ->> 'public_key';
  v_sig      text := p_signature ->> 'signature';
  v_hash     text := p_signature ->> 'content_hash';
  v_problems text[] := '{}';
  v_created  boolean;
  v_fp       text;
begin
  if jsonb_typeof(p_signature) is distinct from 'object' then
    raise exception 'a signature is an object {content_hash, public_key, signature}' using errcode = '22023';
  end if;
  if v_hash is null or v_hash !~ '^[0-9a-f]{64}$' then
    v_problems := v_problems || 'content_hash: must be 64 lower-case hex digits'::text;
  end if;
  if v_key is null or v_key !~ '^[A-Za-z0-9+/]{43}=$' then
    v_problems := v_problems || 'public_key: must be a raw 32-byte Ed25519 key in base64'::text;
  end if;
  if v_sig is null or v_sig !~ '^[A-Za-z0-9+/]{86}==$' then
    v_problems := v_problems || 'signature: must be a raw 64-byte Ed25519 signature in base64'::text;
  end if;
  if cardinality(v_problems) > 0 then
    raise exception 'invalid signature: %', array_to_string(v_problems, '; ')
      using errcode = '22023', hint = 'sign with `kiwi sign TOOL@VERSION`; nothing was signed';
  end if;

  select t.ref, t.namespace, v.id, v.version, v.content_hash
    into v_row
    from public.tools t
    join public.tool_versions v on v.tool_uuid = t.id
   where t.ref = v_ref
     and v.version = coalesce(p_version, t.latest_version)
     and kiwi_internal.can_read(t.visibility, t.namespace);
  if not found then
    raise exception 'tool "%" has no version %', p_tool_id, coalesce(p_version, '(latest)')
      using errcode = 'PT404';
  end if;
  if not kiwi_internal.can_publish_to(v_row.namespace) then
    raise exception 'you cannot sign tools of namespace "%"', v_row.namespace
      using errcode = '42501', hint = 'only those who may publish into a namespace sign its versions';
  end if;
  if v_hash <> v_row.content_hash then
    raise exception 'the signature covers content_hash %, but %@% has content_hash %',
      v_hash, v_row.ref, v_row.version, v_row.content_hash
      using errcode = 'PT409', hint = 'the content signed is not the content published; nothing was signed';
  end if;

  insert into public.tool_version_signatures (version_id, content_hash, public_key, signature, signed_by)
  values (v_row.id, v_hash, v_key, v_sig, auth.uid())
  on conflict (version_id, key_fingerprint) do nothing;
  v_created := found;
  v_fp := encode(sha256(decode(v_key, 'base64')), 'hex');
  return jsonb_build_object('tool_id', v_row.ref, 'version', v_row.version, 'content_hash', v_hash,
                            'key_fingerprint', v_fp, 'created', v_created);
end
$$;
revoke execute on function kiwi_internal.add_signature(text, text, jsonb) from public;
-- It checks the caller itself (can_publish_to, from the session): anon may call it and is
-- refused, as by publish_tool_version.
grant execute on function kiwi_internal.add_signature(text, text, jsonb) to anon, authenticated, service_role;

create function public.sign_tool_version(p_tool_id text, p_version text, p_content_hash text,
                                         p_public_key text, p_signature text)
  returns jsonb
  language plpgsql volatile
  set search_path = ''
as $$
begin
  return kiwi_internal.add_signature(p_tool_id, p_version, jsonb_build_object(
    'content_hash', p_content_hash, 'public_key', p_public_key, 'signature', p_signature));
end
$$;
comment on function public.sign_tool_version(text, text, text, text, text) is
  'Attach an Ed25519 signature of "kiwi-signature-v1\n" || content_hash to a published version. Refused unless the content_hash is the version''s and the caller may publish into its namespace.';
revoke execute on function public.sign_tool_version(text, text, text, text, text) from public;
grant execute on function public.sign_tool_version(text, text, text, text, text) to anon, authenticated, service_role;

-- The signatures of a version as the runner and the MCP server read them.
create function kiwi_internal.signatures_of(p_version_uuid uuid) returns jsonb
  language sql stable
  set search_path = ''
as $$
  select coalesce(jsonb_agg(jsonb_build_object(
           'key_fingerprint', s.key_fingerprint, 'public_key', s.public_key, 'signature', s.signature,
           'content_hash', s.content_hash, 'signed_at', s.signed_at) order by s.signed_at, s.key_fingerprint),
         '[]'::jsonb)
    from public.tool_version_signatures s
   where s.version_id = p_version_uuid
$$;
revoke execute on function kiwi_internal.signatures_of(uuid) from public;
grant execute on function kiwi_internal.signatures_of(uuid) to anon, authenticated, service_role;

-- Each tool's latest version and its signatures (for search and load to show).
create function public.signature_states(p_tool_ids text[])
  returns table (tool_id text, version text, content_hash text, signatures jsonb)
  language sql stable
  set search_path = ''
as $$
  select t.ref, v.version, v.content_hash, kiwi_internal.signatures_of(v.id)
    from public.tools t
    join public.tool_versions v on v.tool_uuid = t.id and v.is_latest
   where t.ref in (select kiwi_internal.normalize_ref(r) from unnest(p_tool_ids) r)
$$;
comment on function public.signature_states(text[]) is
  'The latest version of each named tool the caller may see, with its signatures [{key_fingerprint, public_key, signature, content_hash, signed_at}].';
revoke execute on function public.signature_states(text[]) from public;
grant execute on function public.signature_states(text[]) to anon, authenticated, service_role;

-- What a runner needs to verify a chain for itself, read from the stored rows (never
-- from the plan cache): each element's manifest, its files' paths and sha256s (enough
-- to recompute content_hash) and its signatures.
-- Security definer: resolve_chains has decided, by exact reference, which elements the
-- caller may read (public and unlisted tools, private ones of its namespaces), and this
-- reads only those versions' rows, so an unlisted element attests as fully as it resolves
-- (an invoker would see its namespace and files hidden by the tables' listing rules).
create function kiwi_internal.chain_attestations(p_tool_id text, p_version text)
  returns table (depth int, tool_id text, namespace text, tool_type text, version text,
                 content_hash text, manifest jsonb, files jsonb, signatures jsonb)
  language plpgsql stable security definer
  set search_path = ''
as $$
declare
  r kiwi_internal.chain_row;
begin
  for r in select * from kiwi_internal.resolve_chains(array[p_tool_id], p_version) loop
    if r.error is not null then
      raise exception '%', r.error using errcode = r.error_code;
    end if;
    depth := r.depth; tool_id := r.tool_id; tool_type := r.tool_type; version := r.version;
    content_hash := r.content_hash; manifest := r.manifest; namespace := r.namespace;
    select coalesce(jsonb_agg(jsonb_build_object('path', f.path, 'sha256', f.sha256) order by f.path), '[]')
      into files
      from public.tool_version_files f
     where f.version_id = r.version_uuid;
    signatures := kiwi_internal.signatures_of(r.version_uuid);
    return next;
  end loop;
end
$$;
revoke execute on function kiwi_internal.chain_attestations(text, text) from public;
grant execute on function kiwi_internal.chain_attestations(text, text) to anon, authenticated, service_role;

create function public.resolve_chain_attestations(p_tool_id text, p_version text default null)
  returns table (depth int, tool_id text, namespace text, tool_type text, version text,
                 content_hash text, manifest jsonb, files jsonb, signatures jsonb)
  language sql stable
  set search_path = ''
as $$
  select * from kiwi_internal.chain_attestations(p_tool_id, p_version)
$$;
comment on function public.resolve_chain_attestations(text, text) is
  'The chain of a tool (depth 0 first) with each element''s namespace, manifest, files (path, sha256) and signatures: what a client needs to recompute every content_hash and check every signature itself.';
revoke execute on function public.resolve_chain_attestations(text, text) from public;
grant execute on function public.resolve_chain_attestations(text, text) to anon, authenticated, service_role;
