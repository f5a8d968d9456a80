"""ToolRef: the one reader and printer of `namespace/tool_id@version` (issue 14, item 1).

Pinned here: how a reference is parsed and printed, the errors each surface words its own
way, that every former hand parser now answers as ToolRef does, and that the MCP server of
a plan is derived once (Plan.mcp_server), typed or from the plan's JSON view.
"""

from __future__ import annotations

from typing import Any

import pytest

from runner import ChainLink, Plan, ToolRef, UsageError
from runner.core.plan import mcp_server_of
from runner.core.refs import CLI_WORDS, MCP_WORDS, split_ref, tool_name
from runner.mcp_server.meta import args as meta_args
from runner.policy.permissions import check

PARSED = [
    # text, explicit version, namespace, tool_id, version, ref, printed
    ("hello", None, "public", "hello", None, "hello", "hello"),
    ("acme/hello", None, "acme", "hello", None, "acme/hello", "acme/hello"),
    ("public/hello", None, "public", "hello", None, "hello", "hello"),
    ("  hello  ", None, "public", "hello", None, "hello", "hello"),
    ("hello@1.2.0", None, "public", "hello", "1.2.0", "hello", "hello@1.2.0"),
    ("acme/hello@1.2.0", None, "acme", "hello", "1.2.0", "acme/hello", "acme/hello@1.2.0"),
    ("public/hello@1.2.0", None, "public", "hello", "1.2.0", "hello", "hello@1.2.0"),
    ("hello", "1.2.0", "public", "hello", "1.2.0", "hello", "hello@1.2.0"),
    ("hello@1.2.0", "1.2.0", "public", "hello", "1.2.0", "hello", "hello@1.2.0"),
    ("a@b@1.0.0", None, "public", "a@b", "1.0.0", "a@b", "a@b@1.0.0"),  # the last `@` splits
    ("acme/x.y@2.0.0-rc.1", None, "acme", "x.y", "2.0.0-rc.1", "acme/x.y", "acme/x.y@2.0.0-rc.1"),
    ("a/b/c", None, "a", "b/c", None, "a/b/c", "a/b/c"),  # the first `/` names the namespace
]


@pytest.mark.parametrize(("text", "given", "namespace", "tool_id", "version", "ref", "printed"), PARSED)
def test_parse_and_print(
    text: str, given: str | None, namespace: str, tool_id: str, version: str | None, ref: str, printed: str
) -> None:
    for words in (CLI_WORDS, MCP_WORDS):
        named = ToolRef.parse(text, given, words)
        assert named == ToolRef(namespace, tool_id, version)
        assert (named.ref, str(named)) == (ref, printed)
        assert ToolRef.parse(str(named), None, words) == named, "what it prints, it reads back"


REFUSED = [
    # text, explicit version, words, message, hint
    ("hello@1.0.0", "2.0.0", CLI_WORDS, "two versions given: @1.0.0 and --version 2.0.0", None),
    ("hello@1.0.0", "2.0.0", MCP_WORDS, "two versions given: @1.0.0 and version=2.0.0", "give the version once"),
    ("hello@", "1.0.0", CLI_WORDS, "two versions given: @ and --version 1.0.0", None),
    ("", None, CLI_WORDS, "no tool given", "name a tool: kiwi run hello_world"),
    ("@1.0.0", None, CLI_WORDS, "no tool given", "name a tool: kiwi run hello_world"),
    ("public/", None, CLI_WORDS, "no tool given", "name a tool: kiwi run hello_world"),
    ("", None, MCP_WORDS, "no item_id given", "name an item, e.g. item_id='hello_world'; find ids with search"),
    ("  @1.0.0", None, MCP_WORDS, "no item_id given", "name an item, e.g. item_id='hello_world'; find ids with search"),
    ("hello@", None, CLI_WORDS, "empty version", CLI_WORDS.empty_version_hint),
    ("hello", "", CLI_WORDS, "empty version", CLI_WORDS.empty_version_hint),
]


@pytest.mark.parametrize(("text", "given", "words", "message", "hint"), REFUSED)
def test_refused(text: str, given: str | None, words: Any, message: str, hint: str | None) -> None:
    with pytest.raises(UsageError) as caught:
        ToolRef.parse(text, given, words)
    assert (caught.value.message, caught.value.hint) == (message, hint)


def test_an_empty_version_is_the_latest_over_mcp_and_when_lenient() -> None:
    assert ToolRef.parse("hello@", None, MCP_WORDS).version is None
    assert ToolRef.parse("hello", "", MCP_WORDS).version is None
    assert ToolRef.parse("hello@1.0.0", "", MCP_WORDS).version == "1.0.0"
    assert ToolRef.parse("hello@", strict=False).version is None


def test_lenient_never_refuses_and_the_separate_version_wins() -> None:
    assert ToolRef.parse("hello@1.0.0", "2.0.0", strict=False) == ToolRef("public", "hello", "2.0.0")
    assert ToolRef.parse("@1.0.0", strict=False) == ToolRef("public", "", "1.0.0")
    assert ToolRef.parse("", strict=False).ref == ""


# The hand parsers ToolRef replaced, as they were: each answer below is theirs, modulo the one
# rule now applied everywhere (the reference is normalised: stripped, `public/x` is `x`, which
# the registry did anyway) and thread.py's `partition`, now `rpartition` like the others.
def _old_cli(tool: str, version: str | None) -> tuple[str, str | None]:
    if "@" in tool:
        tool, _, at = tool.rpartition("@")
        if version is not None and version != at:
            raise UsageError(f"two versions given: @{at} and --version {version}")
        version = at
    if not tool:
        raise UsageError("no tool given")
    if version is not None and not version:
        raise UsageError("empty version")
    return tool, version


def _old_mcp(item_id: str | None, version: str | None) -> tuple[str, str | None]:
    ref = (item_id or "").strip()
    if "@" in ref:
        ref, _, at = ref.rpartition("@")
        if version and version != at:
            raise UsageError(f"two versions given: @{at} and version={version}")
        version = at
    if not ref:
        raise UsageError("no item_id given")
    return ref, version or None


def _old_run_failure(tool: str, version: str | None) -> tuple[str, str | None]:  # cli.fail
    ref, _, at = tool.rpartition("@") if "@" in tool else (tool, "", "")
    return ref, version or at or None


def _old_thread(directive: str) -> tuple[str, str | None]:
    ref, _, ver = directive.strip().partition("@")
    return ref, ver or None


INPUTS: list[tuple[str, str | None]] = [
    ("hello", None),
    ("acme/hello", None),
    ("hello@1.0.0", None),
    ("acme/hello@1.0.0", "1.0.0"),
    ("hello@1.0.0", "2.0.0"),
    ("hello@", None),
    ("hello@", "1.0.0"),
    ("hello", ""),
    ("@1.0.0", None),
    ("", None),
    ("a@b@1.0.0", None),
]


def _answer(parse: Any, *args: Any) -> tuple[str, str | None] | str:
    try:
        return parse(*args)
    except UsageError as e:
        return f"refused: {e.message}"


@pytest.mark.parametrize(("text", "given"), INPUTS)
def test_every_former_parser_answers_as_toolref(text: str, given: str | None) -> None:
    def toolref(words: Any, strict: bool = True) -> Any:
        return lambda t, v: (lambda n: (n.ref, n.version))(ToolRef.parse(t or "", v, words, strict=strict))

    assert _answer(split_ref, text, given) == _answer(toolref(CLI_WORDS), text, given) == _answer(_old_cli, text, given)
    assert (
        _answer(meta_args.split_ref, text, given)
        == _answer(toolref(MCP_WORDS), text, given)
        == _answer(_old_mcp, text, given)
    )
    assert _answer(toolref(CLI_WORDS, strict=False), text, given) == _old_run_failure(text, given)
    if given is None and text.strip() and text.count("@") < 2:  # a thread's config.directive; `@@` below
        assert _answer(toolref(CLI_WORDS, strict=False), text, None) == _old_thread(text)


def test_former_parsers_normalise_the_reference_now() -> None:
    assert split_ref("public/hello@1.0.0", None) == ("hello", "1.0.0")
    assert split_ref(" hello ", None) == ("hello", None)
    assert meta_args.split_ref(" public/hello ", None) == ("hello", None)
    assert ToolRef.parse("a@b@1.0.0", strict=False) == ToolRef("public", "a@b", "1.0.0"), "thread.py used partition"


def _plan(*chain: tuple[str, str]) -> Plan:
    links = [{"tool_id": t, "tool_type": k, "version": "1.0.0", "content_hash": "0" * 64} for t, k in chain]
    return Plan.from_json(
        {"tool_id": chain[0][0], "version": "1.0.0", "tool_type": chain[0][1], "content_hash": "0" * 64, "chain": links}
    )


def test_the_mcp_server_of_a_plan() -> None:
    plan = _plan(("acme/fs.read", "mcp_tool"), ("acme/fs", "mcp_server"), ("other", "mcp_server"), ("node", "runtime"))
    assert plan.mcp_server == "acme/fs", "the first mcp_server in the chain"
    assert plan.mcp_server_link == ChainLink("acme/fs", "mcp_server", "1.0.0", "0" * 64)
    json_chain = [{"tool_id": link.tool_id, "tool_type": link.tool_type} for link in plan.chain]
    assert mcp_server_of(json_chain) == mcp_server_of(plan.chain) == plan.mcp_server
    plain = _plan(("hello", "script"), ("python", "runtime"))
    assert plain.mcp_server is None and plain.mcp_server_link is None and mcp_server_of([]) is None


def test_permissions_name_an_mcp_tool_by_the_plans_server() -> None:
    json_view = {
        "tool_id": "acme/fs.read",
        "tool_type": "mcp_tool",
        "config": {"tool": "read_file"},
        "chain": [{"tool_id": "acme/files", "tool_type": "mcp_server"}],
    }
    assert check({"mcp": ["acme/files.read_file"]}, json_view) is None
    assert check({"mcp": ["acme/fs.*"]}, json_view) == 'mcp: acme/files.read_file is not allowed by ["acme/fs.*"]'


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"tool_id": "x"}, "x"),
        ({"tool_id": "x", "namespace": "acme"}, "acme/x"),
        ({"tool_id": "acme/x", "namespace": "other"}, "acme/x"),  # the tool_id's namespace wins
        ({"tool_id": "public/x", "namespace": "acme"}, "x"),
        ({"tool_id": " x ", "namespace": ""}, "x"),
        ({"tool_id": "/x"}, "x"),
    ],
)
def test_a_manifests_identity(manifest: dict[str, Any], expected: str) -> None:
    named = ToolRef.of_manifest(manifest)
    assert named is not None and named.ref == expected


@pytest.mark.parametrize("manifest", [None, [], {}, {"tool_id": 3}])
def test_a_manifest_without_a_tool_id_has_no_identity(manifest: Any) -> None:
    assert ToolRef.of_manifest(manifest) is None


def test_a_tools_name_leaves_its_namespace_out() -> None:
    assert [tool_name(r) for r in ("x", "acme/x", "public/x")] == ["x", "x", "x"]
    assert meta_args.same_tool("acme/x", "x") and not meta_args.same_tool("acme/x", "y")
