"""Runs: the person's runs (an admin's: everyone's), filtered by tool, status, user and time,
and one run's page, with what its record kept of its parameters, output and stderr (masked
and capped by the runner; none when it keeps no payloads). Text is escaped, never rendered."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from ...errors import NotFound
from ...principal import Principal
from ...registry.base import RUN_LIST_COLUMNS, Select
from .forms import text_field

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["PAGES", "WINDOWS"]

STATUSES = ("success", "error", "timeout")
WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "": None}
PAGE_ROWS = 200


def _since(rows: list[dict[str, Any]], window: timedelta | None) -> list[dict[str, Any]]:
    if window is None:
        return rows
    after = datetime.now(UTC) - window
    return [r for r in rows if datetime.fromisoformat(str(r["started_at"])) >= after]


async def runs(console: Console, request: Request, principal: Principal) -> Response:
    query = request.query_params
    filters = {
        "tool_id": text_field(query, "tool"),
        "status": text_field(query, "status"),
        "caller": text_field(query, "user"),
    }
    if filters["status"] not in ("", *STATUSES):
        filters["status"] = ""
    window_name = text_field(query, "since")
    window = WINDOWS.get(window_name)
    args = {name: value for name, value in filters.items() if value}
    newest = Select(order=("started_at",), desc=True, limit=PAGE_ROWS, columns=RUN_LIST_COLUMNS)
    rows = await console.registry.backend.call("tool_runs", args, returns=newest, read=True) or []
    return console.render(
        request,
        "runs.html",
        who=principal.describe(),
        runs=_since(list(rows), window),
        tool=filters["tool_id"],
        status=filters["status"],
        user=filters["caller"],
        since=window_name if window_name in WINDOWS else "",
        statuses=STATUSES,
        windows=list(WINDOWS),
    )


async def run(console: Console, request: Request, principal: Principal) -> Response:
    run_id = _uuid(str(request.path_params["run_id"]), "run")
    one = Select(order=("started_at",), limit=1)
    rows = await console.registry.backend.call("tool_runs", {"id": run_id}, returns=one, read=True) or []
    if not rows:
        raise NotFound(f"run {run_id} not found", hint="a run is shown only to whoever made it (and to admins)")
    return console.render(request, "run.html", who=principal.describe(), run=rows[0])


def _uuid(text: str, what: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise NotFound(f"no {what} has the id {text!r}") from None


PAGES = [
    ("/runs", runs, ("GET",)),
    ("/runs/{run_id}", run, ("GET",)),
]
