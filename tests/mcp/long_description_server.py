"""A stdio MCP server (the Python SDK's MCPServer) with one tool, `lookup`, whose description
is `description(CHARS)`: CHARS (the first argument, default 5000) characters of words, as
long as some real servers' tools describe themselves (desktop_commander's read_file,
circleci's run_rollback_pipeline), more than the registry takes.

    python tests/mcp/long_description_server.py [CHARS]
"""

from __future__ import annotations

import sys

WORDS = "Looks up a word in the glossary and returns its definition, with examples and related entries."


def description(chars: int) -> str:
    """`chars` characters of WORDS said again and again (the same text for the same count)."""
    text = WORDS
    while len(text) < chars:
        text += " " + WORDS
    return text[:chars]


def main() -> None:
    from mcp.server import MCPServer  # only the server process pays for the SDK

    chars = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    server = MCPServer("long-description")

    @server.tool(name="lookup", description=description(chars))
    def lookup(word: str) -> str:
        return f"{word}: a word"

    server.run("stdio")


if __name__ == "__main__":
    main()
