"""search and load show each tool's signature state, judged by the caller's trusted keys:
through the CLI and through Kiwi's MCP server (the SDK's client, in memory)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from mcp import Client

from runner import PostgresRegistry, Runner, TrustSettings, build_server, local_owner
from tests.conftest import local_settings

from .conftest import Chain, Project


def test_cli_search_and_show_say_who_signed(
    project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    key = make_key("publisher")
    stranger = make_key("stranger")
    forget_signatures += [key["fingerprint"], stranger["fingerprint"]]
    project.trust("off", {"public": [key["public_key"]]})
    assert project.kiwi("sign", chain.tool, "--key", "publisher").code == 0
    assert project.kiwi("sign", chain.runtime, "--key", "stranger").code == 0

    found = {r["tool_id"]: r for r in project.kiwi("search", chain.tool, "--json").json()}
    assert found[chain.tool]["signature"]["state"] == "trusted"
    assert found[chain.tool]["signature"]["key_fingerprints"] == [key["fingerprint"]]
    people = project.kiwi("search", chain.tool)
    assert f"{chain.tool}" in people.out and "trusted" in people.out

    shown = project.kiwi("show", chain.tool, "--json").json()
    assert [c["signature"]["state"] for c in shown["chain"]] == ["trusted", "untrusted", "unsigned"]


async def test_mcp_search_and_load_show_signature_states(
    database_url: str, tmp_path: Path, project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    assert project.kiwi("sign", chain.tool, "--key", "publisher").code == 0
    settings = dataclasses.replace(
        local_settings(database_url, tmp_path / "cache"),
        trust=TrustSettings(keys={"public": (key["public_key"],)}),
    )
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
    try:
        async with Client(build_server(runner)) as client:
            found = await client.call_tool("search", {"query": chain.tool})
            items = {i["item_id"]: i for i in found.structured_content["items"]}
            assert items[chain.tool]["signature"]["state"] == "trusted"
            loaded = await client.call_tool("load", {"item_id": chain.tool})
            data = loaded.structured_content
            assert data["signature"]["state"] == "trusted"
            assert [c["signature"]["state"] for c in data["executor_chain"]] == ["trusted", "unsigned", "unsigned"]
            assert f"signatures: {chain.tool} trusted, {chain.runtime} unsigned" in loaded.content[0].text
    finally:
        await runner.aclose()


class _NoSecondQuery:
    """A fake registry for signature_labels: search's rows must already carry what it needs."""

    async def signature_states(self, tool_ids: list[str]) -> list[dict[str, object]]:
        raise AssertionError("signature_states was asked: search did not carry the signatures")


async def test_search_carries_each_tools_signatures_so_its_labels_take_no_second_query(
    database_url: str, project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    from runner.trust.states import signature_labels

    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    assert project.kiwi("sign", chain.tool, "--key", "publisher").code == 0
    trust = TrustSettings(keys={"public": (key["public_key"],)})
    async with PostgresRegistry(database_url, principal=local_owner()) as registry:
        rows = await registry.search(chain.tool)
        assert rows and all(r["content_hash"] and "signatures" in r for r in rows)
        from_rows = await signature_labels(_NoSecondQuery(), rows, trust)  # type: ignore[arg-type]
        bare = [{k: v for k, v in r.items() if k not in ("signatures", "content_hash")} for r in rows]
        asked = await signature_labels(registry, bare, trust)  # the old way: one more query
    assert from_rows == asked and from_rows[chain.tool]["state"] == "trusted"
