"""The approvals inbox: calls waiting for the person's decision, refreshed without a reload."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...errors import UsageError
from ...principal import Principal
from .forms import text_field

if TYPE_CHECKING:
    from ..base import Console

__all__ = ["PAGES"]


async def inbox(console: Console, request: Request, principal: Principal) -> Response:
    rows = await console.registry.approvals()
    decided = None
    if request.query_params.get("decided"):
        decided = {
            "id": text_field(request.query_params, "decided"),
            "status": text_field(request.query_params, "status"),
        }
    return console.render(request, "approvals.html", who=principal.describe(), approvals=rows, decided=decided)


async def inbox_rows(console: Console, request: Request, principal: Principal) -> Response:
    """The inbox's table alone: what htmx polls for."""
    rows = await console.registry.approvals()
    return console.render(request, "approvals_rows.html", approvals=rows)


async def decide(console: Console, request: Request, principal: Principal) -> Response:
    form = await request.form()
    decision = text_field(form, "decision")
    if decision not in ("approve", "deny"):
        raise UsageError("an approval is decided with approve or deny")
    reason = text_field(form, "reason") or None
    approval_id = str(request.path_params["approval_id"])
    decided: dict[str, Any] = await console.registry.decide_approval(approval_id, decision == "approve", reason)
    from ..base import base_path

    status = decided.get("status", decision)
    return RedirectResponse(f"{base_path(request)}/approvals?decided={approval_id}&status={status}", status_code=303)


PAGES = [
    ("/approvals", inbox, ("GET",)),
    ("/approvals/rows", inbox_rows, ("GET",)),
    ("/approvals/{approval_id}/decide", decide, ("POST",)),
]
