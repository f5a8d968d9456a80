"""The web console: people's pages over the registry (approvals, runs, queued runs and
schedules, the registry, MCP servers), server-rendered with Jinja2 and htmx, each request
acting as the person signed in (runner/console/signin.py), under RLS.

`kiwi serve --transport http` mounts it at /console; `kiwi console` serves it alone on this
machine. Nothing here is imported by the layers below it."""

from __future__ import annotations

from .app import CSP, Console, console_app, mounted_console

__all__ = ["CSP", "Console", "console_app", "mounted_console"]
