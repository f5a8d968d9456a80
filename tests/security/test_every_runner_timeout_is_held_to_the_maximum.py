"""Finding: `timeout: 1e308` was accepted. The registry now refuses any numeric `timeout` in a
config above a day, and the runner's `seconds()` refuses the same (MAX_TIMEOUT_S, 86400, in
runner/primitives/process.py: tests/security/test_a_timeout_is_at_most_a_day.py). The runner's
other timeouts now hold to the same constant too, each a ConfigError naming its field, never an
endless wait or a float() traceback: a validation rule's `timeout`, an environment's step
`timeout` (which took any value float() took), an MCP server's `startup_timeout`. Plans here
come from the in-memory registry: published ones could no longer carry these values.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from runner import ConfigError, MemoryBackend, Plan, Registry, Runner
from runner.mcp_client.servers import server_spec
from tests.conftest import local_settings
from tests.test_validation import RUNTIME, plan_of

HUGE = [1e308, 86401, "1m"]


@pytest.fixture
async def run_plan(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Run a plan (made by plan_of) through a Runner over the in-memory registry."""
    settings = local_settings(
        "postgresql://unused", tmp_path / "cache", project_dir=tmp_path, user_space=tmp_path / "user"
    )
    runners: list[Runner] = []

    async def run(plan: dict[str, Any]) -> Any:
        runners.append(Runner(Registry(MemoryBackend([plan])), settings))
        return await runners[-1].run(plan["tool_id"], {})

    yield run
    for runner in runners:
        await runner.aclose()


@pytest.mark.parametrize("timeout", HUGE)
async def test_a_validation_rules_timeout(run_plan: Any, timeout: Any) -> None:
    rule = {"type": "syntax_check", "command": "true", "timeout": timeout}
    result = await run_plan(plan_of("t_rule", {"m.py": "pass\n"}, runtime={**RUNTIME, "validation": {"rules": [rule]}}))
    assert isinstance(result.failure, ConfigError), result
    assert "config.validation.rules[0].timeout must be a number of seconds greater than 0 and at most 86400" in (
        result.error or ""
    )


@pytest.mark.parametrize("timeout", HUGE)
async def test_an_environment_steps_timeout(run_plan: Any, timeout: Any) -> None:
    environment = {"key": ["x"], "steps": [{"command": "true"}], "timeout": timeout}
    result = await run_plan(plan_of("t_env", {"m.py": "pass\n"}, runtime={**RUNTIME, "environment": environment}))
    assert isinstance(result.failure, ConfigError), result
    assert "config.environment.timeout must be a number of seconds greater than 0 and at most 86400" in (
        result.error or ""
    )


@pytest.mark.parametrize("timeout", HUGE)
def test_an_mcp_servers_startup_timeout(timeout: Any) -> None:
    plan = Plan.from_json(
        {
            "tool_id": "srv",
            "version": "1.0.0",
            "tool_type": "mcp_server",
            "content_hash": "0" * 64,
            "config": {"command": "true", "startup_timeout": timeout},
            "chain": [{"tool_id": "srv", "tool_type": "mcp_server", "version": "1.0.0", "content_hash": "0" * 64}],
        }
    )
    with pytest.raises(ConfigError, match=r"config.startup_timeout must be a number of seconds .* at most 86400"):
        server_spec(plan, {"PATH": "/usr/bin:/bin"})
