"""Queued runs (with their events; cancel) and schedules (pause, resume, remove)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...errors import UsageError
from ...fleet.queue import QueuedRuns
from ...principal import Principal
from ...registry.base import Select
from .forms import text_field

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["PAGES"]


async def queue(console: Console, request: Request, principal: Principal) -> Response:
    status = text_field(request.query_params, "status")
    runs = await QueuedRuns(console.registry).page(status=status or None, limit=100)
    schedules = await QueuedRuns(console.registry).schedules()
    return console.render(
        request, "queued.html", who=principal.describe(), runs=runs, schedules=schedules, status=status
    )


async def queued_run(console: Console, request: Request, principal: Principal) -> Response:
    found = await QueuedRuns(console.registry).get(str(request.path_params["run_id"]))
    # a finished queued run's record has the queued run's id (its trace, its details)
    one = Select(order=("started_at",), limit=1)
    records = await console.registry.backend.call("tool_runs", {"id": found["id"]}, returns=one, read=True) or []
    record = records[0] if records else None
    return console.render(request, "queued_run.html", who=principal.describe(), run=found, record=record)


async def cancel(console: Console, request: Request, principal: Principal) -> Response:
    from ..base import base_path

    run_id = str(request.path_params["run_id"])
    await QueuedRuns(console.registry).cancel(run_id)
    return RedirectResponse(f"{base_path(request)}/queued/{run_id}", status_code=303)


async def schedule(console: Console, request: Request, principal: Principal) -> Response:
    from ..base import base_path

    form = await request.form()
    action = text_field(form, "action")
    ref = str(request.path_params["ref"])
    queued = QueuedRuns(console.registry)
    if action in ("pause", "resume"):
        await queued.set_schedule_enabled(ref, action == "resume")
    elif action == "remove":
        await queued.remove_schedule(ref)
    else:
        raise UsageError("a schedule is paused, resumed or removed")
    return RedirectResponse(f"{base_path(request)}/queued", status_code=303)


PAGES = [
    ("/queued", queue, ("GET",)),
    ("/queued/{run_id}", queued_run, ("GET",)),
    ("/queued/{run_id}/cancel", cancel, ("POST",)),
    ("/schedules/{ref}", schedule, ("POST",)),
]
