-- A file's media_type is a media type: `type/subtype` (RFC 6838 restricted names, at most 127
-- characters each) with optional `; name=value` parameters, at most 255 characters in all.
-- A 1 MB media_type was published and then handed to every MCP client that read the file as
-- its resource's mimeType. files_problems (160_publish.sql) refuses one that is
-- not, naming the file; tool_version_files holds the same rule as a constraint.

create function kiwi_internal.is_media_type(p_media_type text) returns boolean
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select char_length(p_media_type) <= 255
     and p_media_type ~ '^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}( *; *[A-Za-z0-9!#$&^_.+-]+=("[^"\\[:cntrl:]]*"|[A-Za-z0-9!#$&^_.+-]+))*$'
$$;
revoke execute on function kiwi_internal.is_media_type(text) from public;
grant execute on function kiwi_internal.is_media_type(text) to anon, authenticated, service_role;

-- Not valid: a row an older registry took stays readable; every new one is checked.
alter table public.tool_version_files
  add constraint media_type_shape check (kiwi_internal.is_media_type(media_type)) not valid;
