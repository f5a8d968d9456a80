"""A queued run is read with the events after a given one, or with none (a poller that only
needs how it stands, as an MCP task's tasks/get does); its latest event comes either way."""

from __future__ import annotations

from runner.fleet import QueuedRuns


async def test_a_run_read_without_its_events_still_says_its_latest(queue: QueuedRuns) -> None:
    run_id = str((await queue.enqueue("hello_world", {"name": "Ada"}))["id"])
    await queue.cancel(run_id)  # its one event: the status it ended with
    full = await queue.get(run_id)
    bare = await queue.get(run_id, events=False)
    later = await queue.get(run_id, after_event=full["events"][-1]["id"])
    assert [e["message"] for e in full["events"]] == ["cancelled"]
    assert bare["events"] == [] and later["events"] == []
    assert bare["last_event"]["message"] == "cancelled" and bare["last_event"]["id"] == full["events"][-1]["id"]
    assert bare["status"] == full["status"] == "cancelled"
