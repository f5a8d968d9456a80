"""The runs' metrics in Prometheus's text format, for `kiwi serve --transport http`'s /metrics.

A registry of this process's own (no process or platform collectors: what Kiwi counts), filled
by the same calls as OpenTelemetry's instruments (runner/telemetry/__init__.py), whether or not
OpenTelemetry is on. The gauges (queue depth by status, the MCP pool's sessions, the database
pool's connections by state) are read when the page is made.

Under `kiwi serve --processes N` the supervisor gives every process one directory
(PROMETHEUS_MULTIPROC_DIR, prometheus_client's multiprocess mode): each process keeps its
values there, and whichever process a scrape reaches answers for all of them. Counters and
histograms are summed (those of a process that ended and was started again included, so they
never go back); the pools' gauges are the live processes' sum, each process writing its own
every few seconds (`keep_gauges`) and when it answers; the queue's depth is the latest read.
"""

from __future__ import annotations

import asyncio
import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from . import add_sink, gauges

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name for it
GAUGES_EVERY_S = 5.0  # how often a process of several writes its pools' gauges

__all__ = ["CONTENT_TYPE_LATEST", "PrometheusSink", "prometheus_sink"]

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class PrometheusSink:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._runs = Counter("kiwi_runs", "Runs ended, by tool and status", ["tool", "status"], registry=self.registry)
        self._duration = Histogram(
            "kiwi_run_duration_seconds",
            "How long runs took",
            ["tool"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._refusals = Counter(
            "kiwi_gate_refusals", "Calls the gate refused, by tool and kind", ["tool", "kind"], registry=self.registry
        )
        self._queue = Gauge(
            "kiwi_queue_depth",
            "Open queued runs by status",
            ["status"],
            registry=self.registry,
            multiprocess_mode="mostrecent",  # one database's queue, read by whichever process answers
        )
        self._pool = Gauge(
            "kiwi_mcp_pool_sessions",
            "Live sessions to other MCP servers",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self._db = Gauge(
            "kiwi_db_pool_connections",
            "The database pool's connections by state",
            ["state"],
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.shared = os.environ.get(MULTIPROCESS_DIR) or None  # a directory every process writes to
        self._written: dict[Gauge, set[str]] = {}  # the labels each labelled gauge was set for so far

    def run(self, tool: str, status: str, seconds: float) -> None:
        self._runs.labels(tool, status).inc()
        self._duration.labels(tool).observe(seconds)

    def refusal(self, tool: str, kind: str) -> None:
        self._refusals.labels(tool, kind).inc()

    def render(self) -> bytes:
        """The exposition, its gauges read now (every process's, when several share a directory)."""
        now = gauges()
        self._by_label(self._queue, now.get("kiwi.queue.depth", {}))
        self._write_pools(now)
        if self.shared is None:
            return generate_latest(self.registry)
        every = CollectorRegistry()
        MultiProcessCollector(every, path=self.shared)
        return generate_latest(every)

    def _write_pools(self, now: dict[str, dict[str, float]]) -> None:
        self._pool.set(sum(now.get("kiwi.mcp.pool.sessions", {}).values()))
        self._by_label(self._db, now.get("kiwi.db.pool.connections", {}))

    def _by_label(self, gauge: Gauge, values: dict[str, float]) -> None:
        """A labelled gauge set to `values`; a label set before and absent now goes from the page:
        cleared, or set to 0 when shared (a shared file keeps every value it was given)."""
        written = self._written.setdefault(gauge, set())
        if self.shared is None:
            gauge.clear()
        else:
            for gone in written - values.keys():
                gauge.labels(gone).set(0)
        for label, value in values.items():
            gauge.labels(label).set(value)
        written.update(values)

    async def keep_gauges(self, every_s: float = GAUGES_EVERY_S) -> None:
        """While one of several processes: write this process's pools' gauges every few seconds,
        so that the process a scrape reaches sums them as they are, not as they were."""
        while self.shared is not None:
            self._write_pools(gauges())
            await asyncio.sleep(every_s)


_sink: PrometheusSink | None = None


def prometheus_sink() -> PrometheusSink:
    """This process's one Prometheus sink, registered on first use."""
    global _sink
    if _sink is None:
        _sink = PrometheusSink()
        add_sink(_sink)
    return _sink
