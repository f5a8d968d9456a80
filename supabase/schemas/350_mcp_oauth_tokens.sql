-- OAuth tokens for remote MCP servers (runner/mcp_client/oauth/): what Kiwi's client pool holds
-- after a user signed in to a server that asks for it (`kiwi mcp login SERVER`), or after a
-- client-credentials grant. One row per user and protected resource (the server's URL).
--
-- The database never sees a token: the runner encrypts both columns with AES-GCM under a
-- key only it holds (KIWI_TOKEN_KEY), bound to the user and the resource, so a row copied to
-- another user or server does not decrypt. The database keeps them apart: RLS lets a user
-- read, write and delete only their own rows (auth.uid()), and the functions below run as
-- the caller (security invoker), so they add no power of their own. Nobody without a JWT
-- subject (anon, service_role) has rows here.

create table kiwi_internal.mcp_oauth_tokens (
  user_id      uuid not null default auth.uid(),
  resource     text not null
               constraint mcp_oauth_tokens_resource_format
               check (char_length(resource) between 1 and 2000 and resource ~ '^https?://'),
  tokens       bytea constraint mcp_oauth_tokens_tokens_size check (octet_length(tokens) <= 65536),
  client_info  bytea constraint mcp_oauth_tokens_client_info_size check (octet_length(client_info) <= 65536),
  updated_at   timestamptz not null default now(),
  constraint mcp_oauth_tokens_pkey primary key (user_id, resource)
);
comment on table kiwi_internal.mcp_oauth_tokens is
  'OAuth tokens and client registrations for remote MCP servers, per user and resource; both columns are AES-GCM ciphertext made by the runner (key KIWI_TOKEN_KEY), never plain tokens.';
comment on column kiwi_internal.mcp_oauth_tokens.resource is 'The MCP server''s URL (the protected resource).';
comment on column kiwi_internal.mcp_oauth_tokens.tokens is 'Encrypted OAuth token response (access, refresh, expiry, scope).';
comment on column kiwi_internal.mcp_oauth_tokens.client_info is 'Encrypted client registration (client_id, client_secret when one was issued).';

alter table kiwi_internal.mcp_oauth_tokens enable row level security;
revoke all on table kiwi_internal.mcp_oauth_tokens from public, anon, authenticated, service_role;
grant select, insert, update, delete on table kiwi_internal.mcp_oauth_tokens to authenticated;

create policy "users keep their own MCP OAuth tokens"
  on kiwi_internal.mcp_oauth_tokens for all to authenticated
  using (user_id = (select auth.uid()))
  with check (user_id = (select auth.uid()));

-- The signed-in caller, or an error saying why tokens need one.
create function kiwi_internal.mcp_oauth_user() returns uuid
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_uid uuid := auth.uid();
begin
  if v_uid is null or kiwi_internal.caller_role() <> 'authenticated' then
    raise exception 'MCP OAuth tokens are kept per signed-in user, and this caller is %',
      kiwi_internal.caller_role()
      using errcode = '42501', hint = 'act as a user (KIWI_ACCESS_TOKEN, or the local owner), not --admin';
  end if;
  return v_uid;
end
$$;
revoke execute on function kiwi_internal.mcp_oauth_user() from public;
grant execute on function kiwi_internal.mcp_oauth_user() to authenticated, service_role;

-- The caller's row for a resource: {user_id, tokens, client_info}, the two as base64 of
-- their ciphertext (null when not stored). user_id comes back even without a row: the
-- runner binds its encryption to it.
create function public.mcp_oauth_token(p_resource text) returns jsonb
  language plpgsql stable
  set search_path = ''
as $$
declare
  v_uid uuid := kiwi_internal.mcp_oauth_user();
  v_row kiwi_internal.mcp_oauth_tokens;
begin
  select * into v_row from kiwi_internal.mcp_oauth_tokens t
   where t.user_id = v_uid and t.resource = p_resource;
  return jsonb_build_object(
    'user_id', v_uid,
    'tokens', encode(v_row.tokens, 'base64'),
    'client_info', encode(v_row.client_info, 'base64'),
    'updated_at', v_row.updated_at);
end
$$;
comment on function public.mcp_oauth_token(text) is
  'The caller''s stored MCP OAuth row for a resource URL: {user_id, tokens, client_info (base64 ciphertext or null), updated_at}. Signed-in users only.';
revoke execute on function public.mcp_oauth_token(text) from public;
grant execute on function public.mcp_oauth_token(text) to authenticated, service_role;  -- service_role: to be told why not

-- Stores the caller's tokens and/or client registration for a resource (base64 ciphertext);
-- an argument left null keeps what is stored.
create function public.save_mcp_oauth_token(
  p_resource text, p_tokens text default null, p_client_info text default null
) returns void
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_uid uuid := kiwi_internal.mcp_oauth_user();
begin
  insert into kiwi_internal.mcp_oauth_tokens as t (user_id, resource, tokens, client_info)
  values (v_uid, p_resource, decode(p_tokens, 'base64'), decode(p_client_info, 'base64'))
  on conflict (user_id, resource) do update
     set tokens = coalesce(excluded.tokens, t.tokens),
         client_info = coalesce(excluded.client_info, t.client_info),
         updated_at = now();
end
$$;
comment on function public.save_mcp_oauth_token(text, text, text) is
  'Stores the caller''s MCP OAuth tokens and/or client registration for a resource (base64 of the runner''s ciphertext); null keeps what is stored.';
revoke execute on function public.save_mcp_oauth_token(text, text, text) from public;
grant execute on function public.save_mcp_oauth_token(text, text, text) to authenticated, service_role;

-- Forgets the caller's row for a resource (a logout); true when there was one.
create function public.forget_mcp_oauth_token(p_resource text) returns boolean
  language plpgsql volatile
  set search_path = ''
as $$
declare
  v_uid uuid := kiwi_internal.mcp_oauth_user();
begin
  delete from kiwi_internal.mcp_oauth_tokens t where t.user_id = v_uid and t.resource = p_resource;
  return found;
end
$$;
comment on function public.forget_mcp_oauth_token(text) is
  'Deletes the caller''s stored MCP OAuth row for a resource URL; true when one was deleted.';
revoke execute on function public.forget_mcp_oauth_token(text) from public;
grant execute on function public.forget_mcp_oauth_token(text) to authenticated, service_role;
