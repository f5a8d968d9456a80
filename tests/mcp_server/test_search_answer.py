"""`search`'s answer is handed to the SDK as built, without a round trip through JSON
(results.ok_built): so it must already be JSON, and share nothing with another answer."""

from __future__ import annotations

from runner import Runner
from runner.mcp_server.meta.results import jsonable
from runner.mcp_server.meta.search import search
from runner.mcp_server.meta.state import ServerState


async def test_a_search_answer_is_json_already_and_its_own(runner: Runner) -> None:
    runner.local_spaces = False  # as build_server sets it: the registry's rows only
    state = ServerState.of(runner, embedder=None)
    for query in ("", "hello", "type:runtime"):
        first = (await search(state, query)).structured_content
        assert first is not None and first["items"], query
        assert first == jsonable(first), "a value the SDK would have to convert"
        for item in first["items"]:  # what one caller does to its answer reaches no other
            item["signature"]["state"] = "changed"
            item["signature"]["key_fingerprints"].append("changed")
        second = (await search(state, query)).structured_content
        assert second is not None
        for item in second["items"]:
            assert item["signature"]["state"] != "changed" and "changed" not in item["signature"]["key_fingerprints"]
