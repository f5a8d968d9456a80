"""A queued run is read with the events after a given one, or with none (a poller that only
needs how it stands, as an MCP task's tasks/get does); its latest event comes either way."""

from __future__ import annotations

from runner import PostgresRegistry, local_owner
from runner.fleet import QueuedRuns
from tests.conftest import runner_url


async def test_a_run_read_without_its_events_still_says_its_latest(database_url: str) -> None:
    registry = PostgresRegistry(runner_url(database_url), principal=local_owner())
    queue = QueuedRuns(registry)
    try:
        run_id = str((await queue.enqueue("hello_world", {"name": "Ada"}))["id"])
        await queue.cancel(run_id)  # its one event: the status it ended with
        full = await queue.get(run_id)
        bare = await queue.get(run_id, events=False)
        later = await queue.get(run_id, after_event=full["events"][-1]["id"])
    finally:
        await registry.aclose()
    assert [e["message"] for e in full["events"]] == ["cancelled"]
    assert bare["events"] == [] and later["events"] == []
    assert bare["last_event"]["message"] == "cancelled" and bare["last_event"]["id"] == full["events"][-1]["id"]
    assert bare["status"] == full["status"] == "cancelled"
