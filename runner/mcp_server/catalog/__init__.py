"""The registry's directives as MCP prompts and its knowledge as MCP resources, on Kiwi's MCP
server: `register_catalog(server, state)` is the one call build_server makes.

    prompts.py     prompts/list, prompts/get (a directive rendered with its arguments)
    resources.py   resources/list, resources/read, resources/templates/list (kiwi://knowledge/...)
    completions.py completion/complete: a prompt's argument values, the templates' {ref}
    listing.py     the page of entries the caller can see (public.list_items), cursors, errors

The SDK's MCPServer serves prompts and resources from its own in-process managers, which hold
nothing here, answers an unknown prompt with error code 0 (and logs a traceback), and has no
pagination; so this replaces those methods' handlers on its low-level server. Capabilities
follow from the handlers the low-level server holds: `prompts`, `resources` and `completions`
are declared; their `listChanged` and `resources.subscribe` are what the registry's
notifications (runner/mcp_server/agent_notifications.py, which reads these URIs with
resources.parse_uri) declare.
"""

from __future__ import annotations

from functools import partial

from mcp.server.mcpserver import MCPServer
from mcp_types import CompleteRequestParams, GetPromptRequestParams, PaginatedRequestParams, ReadResourceRequestParams

from ..meta.state import ServerState
from .completions import complete
from .prompts import get_prompt, list_prompts
from .resources import list_resource_templates, list_resources, read_resource

__all__ = ["register_catalog"]


def register_catalog(server: MCPServer, state: ServerState) -> None:
    """Serve the registry's directives and knowledge on `server` as prompts and resources."""
    lowlevel = server._lowlevel_server  # the SDK's MCPServer has no public seam for these handlers
    lowlevel.add_request_handler("prompts/list", PaginatedRequestParams, partial(list_prompts, state))
    lowlevel.add_request_handler("prompts/get", GetPromptRequestParams, partial(get_prompt, state))
    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, partial(list_resources, state))
    lowlevel.add_request_handler(
        "resources/templates/list", PaginatedRequestParams, partial(list_resource_templates, state)
    )
    lowlevel.add_request_handler("resources/read", ReadResourceRequestParams, partial(read_resource, state))
    lowlevel.add_request_handler("completion/complete", CompleteRequestParams, partial(complete, state))
