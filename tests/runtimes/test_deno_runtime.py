"""The seeded deno_runtime: TypeScript run with deno, with only the permissions a tool asks for.

Deno is not on every machine: without it on PATH, a run says which command is missing (in the
sandbox too); with the copy npm installs (node_modules/deno/deno, outside /usr: the runtime's
profile grants the directory KIWI_DENO_DIR names, on the sandbox's PATH), a TypeScript tool
runs through the chain, in the sandbox and with it off, and a permission it did not ask for
is refused by Deno, not prompted for.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from runner import PrimitiveError, Runner, Settings
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

DENO_BIN = ROOT / "node_modules" / ".bin"
DENO_DIR = ROOT / "node_modules" / "deno"  # the binary itself (.bin holds a link to it)
SCRIPT = """\
const input = JSON.parse(await new Response(Deno.stdin.readable).text());
const who: string = input.name;
let home = "not allowed";
try { home = Deno.env.get("HOME") ?? "unset"; } catch (_) { /* no --allow-env */ }
console.log(JSON.stringify({ greeting: `hello ${who}`, home }));
"""


def greeter(publish_tool: Callable[..., str], **config: object) -> str:
    return publish_tool(
        "deno_greeter",
        {
            "tool_type": "script",
            "executor": "deno_runtime",
            "parameters": [{"name": "name", "type": "string", "required": True}],
            "config": {"timeout": 60, **config},
        },
        {"greet.ts": SCRIPT},
        entrypoint="greet.ts",
    )


def path_without_deno() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "deno").exists())


async def test_a_run_without_deno_names_the_missing_command(
    make_runner: Callable[..., Runner], make_settings: Callable[..., Settings], publish_tool: Callable[..., str]
) -> None:
    for sandbox in (True, False):
        runner = make_runner(make_settings(sandbox=sandbox), environ={**os.environ, "PATH": path_without_deno()})
        result = await runner.run(greeter(publish_tool), {"name": "kiwi"})
        assert result.status == "error"
        assert isinstance(result.failure, PrimitiveError)
        assert "command not found: deno" in result.error
        assert result.executor_chain[1:] == ["deno_runtime", "subprocess"]


@pytest.mark.skipif(not (DENO_DIR / "deno").exists(), reason="deno is installed by npm (make deps)")
@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "sandbox_off"])
async def test_a_typescript_tool_runs_on_deno_with_only_the_permissions_it_asks_for(
    make_runner: Callable[..., Runner],
    make_settings: Callable[..., Settings],
    publish_tool: Callable[..., str],
    sandbox: bool,
) -> None:
    # sandboxed, deno is found where KIWI_DENO_DIR says; with the sandbox off, on the PATH
    path = f"{DENO_BIN}{os.pathsep}{path_without_deno()}"
    environ = {**os.environ, "PATH": path_without_deno() if sandbox else path, "KIWI_DENO_DIR": str(DENO_DIR)}
    runner = make_runner(make_settings(sandbox=sandbox), environ=environ)
    plain = await runner.run(greeter(publish_tool), {"name": "kiwi"})
    assert plain.status == "success", plain.error
    assert plain.output == {"greeting": "hello kiwi", "home": "not allowed"}
    if sandbox:
        assert plain.detail["sandbox"]["fs"]["read"] == [str(DENO_DIR.resolve())]

    args = ["run", "--quiet", "--no-prompt", "--no-config", "--allow-env=HOME", "{entrypoint}"]
    allowed = await runner.run(greeter(publish_tool, args=args), {"name": "deno"})
    assert allowed.status == "success", allowed.error
    assert allowed.output["greeting"] == "hello deno" and allowed.output["home"] not in ("not allowed", "unset")
    if sandbox:
        assert allowed.output["home"] == "/tmp", "the sandbox's HOME, not the runner's"
