"""The meta-tools are module-level functions (runner/mcp_server/meta/): each can be imported and
called with a server state alone, no MCP client or server in between.

The real database and the seeded hello_world; nothing is published.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult

from runner import Runner, Settings
from runner.mcp_server.meta.execute import execute
from runner.mcp_server.meta.help import HELP_TOPICS, help
from runner.mcp_server.meta.load import load
from runner.mcp_server.meta.search import search
from runner.mcp_server.meta.state import ServerState
from runner.mcp_server.server import bound


@pytest.fixture
async def state(
    tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]
) -> ServerState:
    runner = make_runner(make_settings(cache_dir=tmp_path / "cache"))
    return ServerState.of(runner, session_id=f"alone-{uuid.uuid4().hex[:8]}")


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    return result.structured_content["error"]


async def test_search_alone_finds_hello_world_and_checks_the_item_type(state: ServerState) -> None:
    found = ok(await search(state, "hello"))
    assert found["query"] == "hello" and found["item_type"] is None and found["count"] == len(found["items"])
    first = found["items"][0]
    assert (first["item_id"], first["item_type"], first["tool_type"]) == ("hello_world", "tool", "script")
    assert first["signature"]["state"]
    knowledge = ok(await search(state, "", "knowledge", 3))
    assert 0 < knowledge["count"] <= 3 and {i["item_type"] for i in knowledge["items"]} == {"knowledge"}
    wrong = error(await search(state, "hello", "gadget"))
    assert wrong["kind"] == "usage" and "unknown item_type 'gadget'" in wrong["message"]


async def test_load_alone_gives_the_chain_parameters_and_files(state: ServerState) -> None:
    loaded = ok(await load(state, "hello_world"))
    assert loaded["item_id"] == "hello_world" and loaded["item_type"] == "tool" and loaded["version"] == "1.0.0"
    assert [c["tool_id"] for c in loaded["executor_chain"]] == ["hello_world", "bash_runtime", "subprocess"]
    assert loaded["parameters"]["properties"]["name"]["type"] == "string"
    [file] = loaded["files"]
    assert file["path"] == "hello.sh" and "content_text" not in file
    with_text = ok(await load(state, "hello_world@1.0.0", include_content=True))
    assert "KIWI_PARAM_NAME" in with_text["files"][0]["content_text"]
    mismatch = error(await load(state, "hello_world", "directive"))
    assert mismatch["kind"] == "usage" and "not a directive" in mismatch["message"]


async def test_help_alone_gives_the_guide_and_refuses_unknown_topics(state: ServerState) -> None:
    guide = ok(await help(state))
    assert guide["topic"] == "all" and guide["topics"] == list(HELP_TOPICS)
    assert "execute" in guide["text"] and "dry_run" in guide["text"]
    errors = ok(await help(state, "errors"))
    assert errors["topic"] == "errors" and errors["text"].startswith("## Errors")
    unknown = error(await help(state, "everything"))
    assert unknown["kind"] == "usage" and unknown["hint"] == "topics: " + ", ".join(HELP_TOPICS)


async def test_help_names_what_the_server_offers_beyond_the_four_tools(state: ServerState) -> None:
    guide = ok(await help(state))["text"]
    assert "topic protocol" in guide, "the overview points to it"
    protocol = ok(await help(state, "protocol"))["text"]
    for offered in ("prompts/get", "kiwi://knowledge/<ref>@<version>", "completion/complete", "logging/setLevel"):
        assert offered in protocol, offered
    for offered in ("stderr", "list_changed", "resources/subscribe", "kiwi serve --directive REF"):
        assert offered in protocol, offered


async def test_execute_alone_dry_runs_hello_world(state: ServerState) -> None:
    dry = ok(await execute(state, "dry_run", item_id="hello_world", parameters={"name": "Ada"}))
    assert dry["dry_run"] is True and dry["status"] == "success" and dry["validation"]["passed"] is True
    assert dry["tool_id"] == "hello_world" and dry["version"] == "1.0.0"
    assert dry["executor_chain"] == ["hello_world", "bash_runtime", "subprocess"]
    assert dry["output"]["parameters"] == {"name": "Ada"}
    unknown = error(await execute(state, "fly", item_id="hello_world"))
    assert unknown["kind"] == "usage" and unknown["message"] == "unknown action 'fly'"


async def test_a_bound_meta_tool_shows_the_sdk_its_signature_without_the_state(state: ServerState) -> None:
    tool = bound(execute, state)
    assert tool.__name__ == "execute" and tool.__doc__ == execute.__doc__
    params = inspect.signature(tool).parameters
    assert "state" not in params and list(params)[:2] == ["action", "item_id"] and "ctx" in params
    full = inspect.signature(execute, eval_str=True).parameters
    assert all(params[name] == full[name] for name in params)
