"""Which handler runs a plan (runner/harness/dispatch.py), with plans built in memory.

Regression: once handlers were assembled at the entry points, a Runner built without
`standard_dispatcher()` ran an MCP tool through the subprocess primitive (its chain ends in its
server's runtime): it spawned the server and answered "" as a success. A type that only a
handler runs is now refused by a bare dispatcher, naming the fix.
"""

from __future__ import annotations

import pytest

from runner import Dispatcher, Plan, Refused, standard_dispatcher


def plan(tool_type: str, primitive: str | None = "subprocess") -> Plan:
    return Plan(
        tool_id=f"a_{tool_type}",
        version="1.0.0",
        tool_type=tool_type,
        content_hash="0" * 64,
        primitive=primitive,
        executor_id=None,
        chain=[],
        config={},
        parameters=None,
    )


@pytest.mark.parametrize("tool_type", ["mcp_tool", "directive", "thread"])
def test_a_bare_dispatcher_refuses_what_only_a_handler_runs(tool_type: str) -> None:
    with pytest.raises(Refused, match=f"a {tool_type} needs its handler") as refused:
        Dispatcher().find(plan(tool_type))
    assert refused.value.hint == "build the Runner with dispatcher=runner.standard_dispatcher()"


@pytest.mark.parametrize(("tool_type", "name"), [("mcp_tool", "mcp"), ("directive", "directive"), ("thread", "thread")])
def test_the_standard_dispatcher_gives_each_its_handler(tool_type: str, name: str) -> None:
    assert standard_dispatcher().find(plan(tool_type)).name == name


@pytest.mark.parametrize(("tool_type", "primitive"), [("script", "subprocess"), ("api", "http_client")])
def test_scripts_and_apis_run_on_their_primitive_either_way(tool_type: str, primitive: str) -> None:
    assert Dispatcher().find(plan(tool_type, primitive)).name == primitive
    assert standard_dispatcher().find(plan(tool_type, primitive)).name == primitive


def test_a_chain_that_ends_nowhere_is_refused_naming_where_it_ends() -> None:
    with pytest.raises(Refused, match="its chain ends at 'teleport'"):
        Dispatcher().find(plan("script", "teleport"))
