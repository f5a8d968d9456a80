-- Integrity: one canonical JSON form and one content hash, documented so that any
-- client can recompute them (tests/test_content_hash.py does, in Python).
--
-- canonical_json(v):
--   object  -> {"k":v,...} with keys sorted by Unicode code point, no whitespace
--   array   -> [v,...] in order
--   string  -> JSON string: \" \\ \b \f \n \r \t escaped, other U+0000-U+001F as
--              \u00xx (lower-case hex), everything else literal UTF-8
--   number  -> plain decimal, no exponent, no trailing fractional zeros (1.50 -> 1.5,
--              1e3 -> 1000)
--   true / false / null
--
-- content_hash = lower-case hex SHA-256 of the UTF-8 bytes of
--   "kiwi-content-v1\n" || canonical_json(manifest) || "\n"
--   || for each file, sorted by path (code point order): path || "\t" || sha256 || "\n"
-- where a file's sha256 is the hex SHA-256 of its content's UTF-8 bytes. Paths cannot
-- hold tabs or newlines, so the framing is unambiguous.

create function kiwi_internal.canonical_json(p_value jsonb) returns text
  language plpgsql immutable strict parallel safe
  set search_path = ''
as $$
declare
  v_out text;
begin
  case jsonb_typeof(p_value)
    when 'object' then
      select '{' || coalesce(string_agg(to_jsonb(e.key)::text || ':' || kiwi_internal.canonical_json(e.value),
                                        ',' order by e.key collate "C"), '') || '}'
        into v_out
        from jsonb_each(p_value) as e;
    when 'array' then
      select '[' || coalesce(string_agg(kiwi_internal.canonical_json(a.value), ',' order by a.ord), '') || ']'
        into v_out
        from jsonb_array_elements(p_value) with ordinality as a(value, ord);
    when 'number' then
      v_out := trim_scale(p_value::text::numeric)::text;
    else
      v_out := p_value::text;  -- strings (PostgreSQL escapes as documented), booleans, null
  end case;
  return v_out;
end
$$;
revoke execute on function kiwi_internal.canonical_json(jsonb) from public;
grant execute on function kiwi_internal.canonical_json(jsonb) to anon, authenticated, service_role;

create function kiwi_internal.sha256_hex(p_text text) returns text
  language sql immutable strict parallel safe
  set search_path = ''
as $$
  select encode(sha256(convert_to(p_text, 'UTF8')), 'hex')
$$;
revoke execute on function kiwi_internal.sha256_hex(text) from public;
grant execute on function kiwi_internal.sha256_hex(text) to anon, authenticated, service_role;

-- p_files: [{path, sha256}, ...]
create function kiwi_internal.content_hash(p_manifest jsonb, p_files jsonb) returns text
  language sql immutable parallel safe
  set search_path = ''
as $$
  select kiwi_internal.sha256_hex(
    'kiwi-content-v1' || E'\n' || kiwi_internal.canonical_json(p_manifest) || E'\n' ||
    coalesce((select string_agg((f ->> 'path') || E'\t' || (f ->> 'sha256') || E'\n', ''
                                order by (f ->> 'path') collate "C")
                from jsonb_array_elements(coalesce(p_files, '[]')) as f), ''))
$$;
revoke execute on function kiwi_internal.content_hash(jsonb, jsonb) from public;
grant execute on function kiwi_internal.content_hash(jsonb, jsonb) to anon, authenticated, service_role;
