-- Remote MCP servers over a websocket (runner/mcp_client/websocket.py): an mcp_server's
-- config may say `transport: websocket` (or `ws`) with a ws:// or wss:// url, beside stdio,
-- streamable_http and sse. This widens the transport key of the mcp_server rule
-- (150_config_contracts.sql) so that publish accepts it.
update public.tool_type_rules
   set config_schema = jsonb_set(
         jsonb_set(config_schema, '{properties,transport,enum}',
                   (config_schema #> '{properties,transport,enum}') || '["websocket", "ws"]'::jsonb),
         '{properties,transport,description}',
         to_jsonb('stdio (command, args, env), or streamable_http, sse or websocket (url, headers; '
                  || 'a websocket url is ws:// or wss://); default: stdio when there is a command'::text))
 where tool_type = 'mcp_server'
   and not (config_schema #> '{properties,transport,enum}') ? 'websocket';
