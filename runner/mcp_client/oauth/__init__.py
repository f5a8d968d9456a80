"""OAuth 2.1 for the remote MCP servers Kiwi's client pool connects to (MCP authorization).

The protocol is the official SDK's (mcp.client.auth: discovery from WWW-Authenticate and
protected resource metadata, authorization server metadata, dynamic client registration or a
client ID metadata document, authorization code with PKCE, client credentials, refresh);
this package gives it what is Kiwi's:

    config.py    the `auth` block of an mcp_server's config, checked (secrets only as ${VAR})
    crypto.py    AES-GCM under KIWI_TOKEN_KEY: tokens are ciphertext before they leave the runner
    storage.py   the SDK's TokenStorage over Postgres (per user, under RLS), or in memory
    provider.py  the SDK's provider for a config, and per-caller providers for the pool's sessions
    login.py     `kiwi mcp login SERVER`: a loopback redirect listener and the browser step
    logout.py    `kiwi mcp logout SERVER`: the caller's stored tokens for a server, forgotten
    conformance_client.py  the client command the MCP conformance suite drives
"""
