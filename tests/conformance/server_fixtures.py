"""The conformance suite's server fixtures that can be ordinary registry items, published under
the exact names its scenarios call, through the registry's one publish path
(`public.publish_tool_version`, as the admin connection of tests/conftest.py does).

The suite calls fixed names: a prompt `test_simple_prompt`, a tool `test_tool_with_logging`,
and so on. Where Kiwi's own kind of item can be that fixture (a directive is a prompt, a script
tool is a tool, a knowledge entry is a resource), it is published here in `public`, the namespace
bare references resolve in, so its name is the bare id the suite asks for. Fixtures that no
registry item can be (an image content block, a fixed `test://` URI, a request back to the
client) are not faked here: server_not_applicable.yaml names them with the reason.

The tools are reached by `tools/call <name>` on a direct-mode server (`kiwi serve --directive
conformance_server_fixtures`: the directive declares them all, and direct mode lists a
directive's tools under their own names).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

__all__ = ["FIXTURES", "FIXTURE_DIRECTIVE", "FIXTURE_KNOWLEDGE", "FIXTURE_PROMPTS", "published_fixtures"]

Fixture = tuple[dict[str, Any], dict[str, str]]  # manifest, files (path -> text)

FIXTURE_DIRECTIVE = "conformance_server_fixtures"
FIXTURE_KNOWLEDGE = "conformance_note"
FIXTURE_PROMPTS = ("test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource")


def _script(tool_id: str, description: str, body: str, parameters: dict[str, Any] | list[Any] | None = None) -> Fixture:
    manifest: dict[str, Any] = {
        "tool_id": tool_id,
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "description": description,
        "entrypoint": "run.sh",
        "parameters": parameters if parameters is not None else [],
        "config": {"timeout": 30},
    }
    return manifest, {"run.sh": f"#!/usr/bin/env bash\nset -euo pipefail\n{body}\n"}


def _directive(tool_id: str, description: str, text: str, **declarations: Any) -> Fixture:
    manifest = {
        "tool_id": tool_id,
        "tool_type": "directive",
        "executor": "directive_runtime",
        "version": "1.0.0",
        "description": description,
        "entrypoint": "directive.md",
        **declarations,
    }
    return manifest, {"directive.md": text + "\n"}


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

TOOLS: tuple[Fixture, ...] = (
    _script("test_simple_text", "Answers one line of text.", 'echo "This is a simple text response for testing."'),
    _script(
        "test_error_handling",
        "Always fails, saying so.",
        'echo "This tool intentionally returns an error for testing" >&2\nexit 1',
    ),
    _script(
        "test_tool_with_logging",
        "Writes three lines to stderr 50 ms apart (they become log notifications), then answers.",
        'echo "Tool execution started" >&2\nsleep 0.05\necho "Tool processing data" >&2\nsleep 0.05\n'
        'echo "Tool execution completed" >&2\necho "Tool with logging executed successfully"',
    ),
    _script(
        "test_tool_with_progress",
        "Writes three stderr lines 50 ms apart (each one a progress notification, counting up), then answers.",
        'echo "progress 0/100" >&2\nsleep 0.05\necho "progress 50/100" >&2\nsleep 0.05\n'
        'echo "progress 100/100" >&2\necho "Tool with progress executed successfully"',
    ),
    _script(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        'echo "received"',
        JSON_SCHEMA_2020_12,
    ),
)

KNOWLEDGE: Fixture = (
    {
        "tool_id": FIXTURE_KNOWLEDGE,
        "tool_type": "knowledge",
        "version": "1.0.0",
        "description": "A knowledge entry the conformance run lists and a fixture prompt cites.",
        "entrypoint": "note.md",
    },
    {"note.md": "Embedded resource content for testing.\n"},
)

PROMPTS: tuple[Fixture, ...] = (
    _directive("test_simple_prompt", "A simple prompt without arguments.", "This is a simple prompt for testing."),
    _directive(
        "test_prompt_with_arguments",
        "A prompt with two required arguments.",
        "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'",
        parameters=[
            {"name": "arg1", "type": "string", "required": True, "description": "First argument"},
            {"name": "arg2", "type": "string", "required": True, "description": "Second argument"},
        ],
    ),
    _directive(
        "test_prompt_with_embedded_resource",
        "A prompt that cites a knowledge entry (which prompts/get may embed as a resource).",
        f"Please process the embedded resource above ({{resourceUri}}); it is `{FIXTURE_KNOWLEDGE}`.",
        parameters=[{"name": "resourceUri", "type": "string", "required": True, "description": "The resource's URI"}],
        cites=[FIXTURE_KNOWLEDGE],
    ),
)

TOOL_IDS = tuple(m["tool_id"] for m, _ in TOOLS)
DIRECTIVE: Fixture = _directive(
    FIXTURE_DIRECTIVE,
    "The conformance suite's fixture tools, as one directive's tool context (for direct mode).",
    "Call the conformance suite's fixture tools.",
    requires={"tools": [{"id": t} for t in TOOL_IDS]},
    permissions={"tools": list(TOOL_IDS)},
)

FIXTURES: tuple[Fixture, ...] = (*TOOLS, KNOWLEDGE, *PROMPTS, DIRECTIVE)
"""Every fixture item, in publish order (what a directive requires or cites comes before it)."""


def _delete(conn: psycopg.Connection, refs: list[str]) -> None:
    for ref in refs:  # dependents (directives) last in FIXTURES, so first here
        conn.execute("delete from public.tools where ref = %s", (ref,))


@contextlib.contextmanager
def published_fixtures(database_url: str) -> Iterator[list[str]]:
    """Publish every fixture (after removing any a crashed run left); remove them afterwards."""
    refs = [m["tool_id"] for m, _ in reversed(FIXTURES)]
    with psycopg.connect(database_url, autocommit=True) as conn:
        _delete(conn, refs)
        try:
            for manifest, files in FIXTURES:
                rows = [
                    {"path": p, "content_text": t, "is_entrypoint": p == manifest["entrypoint"]}
                    for p, t in files.items()
                ]
                conn.execute("select public.publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(rows)))
            yield [m["tool_id"] for m, _ in FIXTURES]
        finally:
            _delete(conn, refs)
