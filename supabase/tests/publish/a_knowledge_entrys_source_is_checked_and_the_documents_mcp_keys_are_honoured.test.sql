-- A knowledge entry's config is what the design documents give it (entry_type, source_type,
-- source_url): each a string, source_url an http(s) URL, any other key refused by name. The
-- documents' keys of an MCP server and tool (startup_timeout, mcp_tool_name) are honoured:
-- stored as the keys the runner reads, and publish says so.
begin;
\ir ../_setup.sql
select plan(10);

create function tests.refusal(p_manifest jsonb, p_files jsonb default '[]') returns text
  language plpgsql as $$
begin
  perform public.publish_tool_version(p_manifest, p_files);
  return 'published';
exception when invalid_parameter_value then
  return sqlerrm;
end $$;

select is(tests.refusal('{"tool_id": "kb_sourced", "tool_type": "knowledge", "executor": null, "version": "1.0.0",
    "config": {"entry_type": "pattern", "source_type": "docs", "source_url": "https://example.com/guide#caching"}}',
    '[{"path": "content.md", "content_text": "# Caching"}]'),
  'published', 'a knowledge entry as the documents write it is published');
select is((select v.manifest -> 'config' ->> 'source_url' from public.tool_versions v join public.tools t on t.id = v.tool_uuid
            where t.ref = 'kb_sourced'), 'https://example.com/guide#caching', 'with its source kept as written');
select matches(tests.refusal('{"tool_id": "kb_ftp", "tool_type": "knowledge", "version": "1.0.0",
    "config": {"source_url": "ftp://example.com/guide"}}'),
  'config\.source_url: "ftp://example\.com/guide" is not an http or https URL', 'a source_url of another scheme is refused by name');
select matches(tests.refusal('{"tool_id": "kb_words", "tool_type": "knowledge", "version": "1.0.0",
    "config": {"source_url": "see the wiki"}}'),
  'config\.source_url: "see the wiki" is not an http or https URL', 'so is one that is no URL');
select matches(tests.refusal('{"tool_id": "kb_creds", "tool_type": "knowledge", "version": "1.0.0",
    "config": {"source_url": "https://user:secret@example.com/"}}'),
  'config\.source_url: .* no user:password@', 'and one that carries a user name and password');
select matches(tests.refusal('{"tool_id": "kb_types", "tool_type": "knowledge", "version": "1.0.0",
    "config": {"source_url": 42, "source_type": ["docs"], "entry_type": true}}'),
  '^(?=.*config\.entry_type: must be a string)(?=.*config\.source_type: must be a string)(?=.*config\.source_url: must be a string)',
  'each field of the wrong type is refused by name');
select matches(tests.refusal('{"tool_id": "kb_typo", "tool_type": "knowledge", "version": "1.0.0",
    "config": {"sorce_url": "https://example.com/"}}'),
  'config\.sorce_url: unknown key \(did you mean source_url\?\)', 'a misspelt source field is refused naming the one it meant');

select is(tests.refusal('{"tool_id": "docs_keys_mcp", "tool_type": "mcp_server", "executor": "subprocess", "version": "1.0.0",
    "config": {"transport": "stdio", "command": "node", "args": ["server.js"], "startup_timeout": 10}}'),
  'published', 'an MCP server with the documents'' startup_timeout is published');
select is((select v.manifest -> 'config' -> 'startup_timeout' from public.tool_versions v join public.tools t on t.id = v.tool_uuid
            where t.ref = 'docs_keys_mcp'), '10'::jsonb, 'the key the runner reads');
select is(public.publish_tool_version('{"tool_id": "docs_keys_echo", "tool_type": "mcp_tool", "executor": "docs_keys_mcp",
    "version": "1.0.0", "config": {"mcp_tool_name": "echo"}}') -> 'normalised',
  '["config.mcp_tool_name -> config.tool"]'::jsonb, 'an MCP tool''s mcp_tool_name is stored as config.tool, and publish says so');

select * from finish();
rollback;
