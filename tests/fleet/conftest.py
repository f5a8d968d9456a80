"""What the fleet's tests share: the run queue as the local owner uses it (through the runner's
login, as `kiwi queue` does), and a bash tool that says it started, then sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from runner import PostgresRegistry, local_owner
from runner.fleet import QueuedRuns
from tests.conftest import runner_url


@pytest.fixture
async def queue(database_url: str) -> AsyncIterator[QueuedRuns]:
    registry = PostgresRegistry(runner_url(database_url), principal=local_owner())
    yield QueuedRuns(registry)
    await registry.aclose()


@pytest.fixture
def sleeper(publish_tool: Callable[..., str]) -> Callable[[int, int], str]:
    """sleeper(sleep_s, timeout_s): a tool that writes "started" to stderr, then sleeps."""

    def publish(sleep_s: int, timeout_s: int) -> str:
        script = f'echo "started" >&2\nsleep {sleep_s}\necho \'{{"done": true}}\'\n'
        return publish_tool(
            "sleeper",
            {"tool_type": "script", "executor": "bash_runtime", "parameters": [], "config": {"timeout": timeout_s}},
            {"run.sh": script},
            entrypoint="run.sh",
        )

    return publish


async def started(queue: QueuedRuns, run_id: str) -> int:
    """How many times the run said it started (one per attempt that got that far)."""
    return sum(1 for e in (await queue.get(run_id))["events"] if e.get("message") == "started")
