"""An environment is built from what its key names, never from a tool's files.

Found in an audit: environment steps ran with the tool's own files mounted at /kiwi/tool, but
the environment's cache key hashed only the requires and the steps. A Python tool with
`requires: ["-r", "/kiwi/tool/req.txt"]` kept the packages its first req.txt named after the
file changed, and another tenant's tool with the same requires and its own req.txt ran in the
first publisher's environment, with that tenant's secrets. Now the steps see nothing of the
tool's, neither its files nor the host paths its profile grants (runner/sandbox/site.py:
confine_steps), so the key covers all they read; a step that names the tool's files fails
with an error saying why. Likewise the names of the variables the steps receive are in the
key: an environment built with one namespace's granted variable is not another's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from runner import LOCAL_JWT_SECRET, Runner, Settings, from_token
from runner.sandbox import TOOL_DIR
from runner.testing.http_serving import two_tenants

pytestmark = pytest.mark.slow

# the same environment for every tool that declares it: the key and the steps are equal
ENVIRONMENT = {
    "key": ["probe"],
    "steps": [{"command": "bash", "args": ["-c", f'cp {TOOL_DIR}/marker.txt "{{env_dir}}/marker"']}],
    "timeout": 60,
}


@pytest.fixture
def runner(make_settings: Callable[..., Settings], make_runner: Callable[..., Runner], tmp_path: Path) -> Runner:
    return make_runner(make_settings(cache_dir=tmp_path / "cache"))


def _probe(publish_tool: Callable[..., str], marker: str) -> str:
    manifest = {
        "tool_type": "script",
        "executor": "bash_runtime",
        "config": {"timeout": 60, "environment": ENVIRONMENT},
    }
    files = {"run.sh": "cat /kiwi/env/marker 2>&1; echo\n", "marker.txt": marker}
    return publish_tool("envprobe", manifest, files, entrypoint="run.sh")


async def test_one_tenants_files_never_build_anothers_environment(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    first, second = f"first-{uuid.uuid4().hex}", f"second-{uuid.uuid4().hex}"
    attacker = await runner.run(_probe(publish_tool, first), {})
    victim = await runner.run(_probe(publish_tool, second), {})
    assert first not in str(victim.output) and first not in str(victim.error), "the victim ran in the first's build"
    for result in (attacker, victim):
        assert result.status == "error", result.output
        assert "do not see the tool's files" in str(result.error), result.error
        assert "marker.txt" in str(result.error), "the failing step is named"


async def test_a_host_path_the_tool_is_granted_is_not_seen_by_its_environment_steps(
    runner: Runner, publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    """The same for a path an admin granted the tool (sandbox.fs.read): not in the key, so not
    in the steps' sandbox (the tool itself still reads it)."""
    granted = tmp_path / "granted"
    granted.mkdir()
    granted.chmod(0o755)
    tmp_path.chmod(0o755)
    (granted / "marker.txt").write_text(f"granted-{uuid.uuid4().hex}")
    (granted / "marker.txt").chmod(0o644)
    environment = {**ENVIRONMENT, "steps": [{"command": "cp", "args": [f"{granted}/marker.txt", "{env_dir}/m"]}]}
    config = {"timeout": 60, "environment": environment, "sandbox": {"fs": {"read": [str(granted)]}}}
    manifest = {"tool_type": "script", "executor": "bash_runtime", "config": config}
    tool = publish_tool("envprobe", manifest, {"run.sh": f"cat {granted}/marker.txt\n"}, entrypoint="run.sh")
    result = await runner.run(tool, {})
    assert result.status == "error" and "preparing the environment failed" in str(result.error), result.output
    assert "No such file" in str(result.error), result.error
    del config["environment"]
    plain = await runner.run(
        publish_tool("envprobe", manifest, {"run.sh": f"cat {granted}/marker.txt\n"}, entrypoint="run.sh"), {}
    )
    assert plain.status == "success" and "granted-" in str(plain.output), "the tool itself reads its grant"


async def test_a_requirements_file_of_the_tool_is_refused_with_the_reason(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    manifest = {
        "tool_type": "script",
        "executor": "python_runtime",
        "config": {"timeout": 120, "requires": ["-r", f"{TOOL_DIR}/req.txt"]},
    }
    files = {"main.py": "import six\nprint(six.__version__)\n", "req.txt": "six==1.16.0\n"}
    result = await runner.run(publish_tool("envprobe_py", manifest, files, entrypoint="main.py"), {})
    assert result.status == "error", result.output
    assert f"-r {TOOL_DIR}/req.txt" in str(result.error)
    assert "do not see the tool's files" in str(result.error), result.error


GRANTED = f"KIWI_TEST_ENV_GRANT_{uuid.uuid4().hex[:8].upper()}"
GRANTED_VALUE = f"granted-{uuid.uuid4().hex}"


async def test_an_environment_built_with_a_granted_variable_is_never_another_namespaces(
    conn: psycopg.Connection, make_runner: Callable[..., Runner], make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """Namespace A, granted a variable, passes it to its environment's steps, which keep it in the
    environment; namespace B publishes the same key and steps without it (B may not name it).
    The key held only the key and steps: B's tool ran in A's environment and read A's value."""
    steps = [{"command": "bash", "args": ["-c", f'printf "%s" "${GRANTED}" > "{{env_dir}}/kept"'.replace("${", "$")]}]
    environment = {"key": ["kept"], "steps": steps, "timeout": 60}
    files = [{"path": "run.sh", "content_text": 'echo "kept=$(cat /kiwi/env/kept)"\n', "is_entrypoint": True}]
    environ = {"PATH": "/usr/bin:/bin", GRANTED: GRANTED_VALUE}
    settings = make_settings(cache_dir=tmp_path / "shared")  # one runner's cache, as `kiwi serve` has
    with two_tenants(conn, "envkey") as made:
        try:
            conn.execute("select grant_secret(%s, %s)", (made["a"]["ns"], GRANTED))
            outputs = {}
            for name, passthrough in (("a", [GRANTED]), ("b", [])):
                principal = from_token(made[name]["token"], secret=LOCAL_JWT_SECRET)
                runner = make_runner(settings, principal=principal, environ=environ)
                config = {"timeout": 60, "environment": environment, "env_passthrough": passthrough}
                manifest = {
                    "tool_id": f"{made[name]['ns']}/kept",
                    "version": "1.0.0",
                    "tool_type": "script",
                    "executor": "bash_runtime",
                    "entrypoint": "run.sh",
                    "config": config,
                }
                await runner.registry.publish(manifest, files)
                result = await runner.run(manifest["tool_id"])
                assert result.status == "success", result.error
                outputs[name] = str(result.output)
        finally:
            conn.execute("delete from namespace_secret_grants where namespace = %s", (made["a"]["ns"],))
    assert outputs["a"] == f"kept={GRANTED_VALUE}", "A's steps got its granted value"
    assert GRANTED_VALUE not in outputs["b"] and outputs["b"] == "kept=", outputs["b"]
