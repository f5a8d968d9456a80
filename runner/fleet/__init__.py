"""Runs that outlive the request: the run queue on pgmq (queue.py, for whoever queues, polls
and cancels: the CLI, the MCP server's tasks), and the workers that run what it holds
(worker.py). Everything lives in Postgres (supabase/schemas/560-590), so any worker on any
machine, and any `kiwi serve` instance, can take part."""

from .queue import TERMINAL, QueuedRuns, task_status, task_status_of

__all__ = ["TERMINAL", "QueuedRuns", "task_status", "task_status_of"]
