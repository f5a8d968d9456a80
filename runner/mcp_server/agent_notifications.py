"""Registry changes told to connected agents: `notifications/{tools,prompts,resources}/list_changed`
and, for a subscribed knowledge entry, `notifications/resources/updated`.

    attach_notifications(server, registry)   # in build_server; a Postgres registry is listened to

Kinds map to lists: tools change `tools/list` (and what `search` finds), directives are
prompts, knowledge entries are resources at `kiwi://knowledge/<ref>@<version>` (without a
version: the latest). The server declares `listChanged` for all three and
`resources.subscribe`; the changes come from one LISTEN connection per process
(registry_events.py), started when the server's lifespan is first entered.

Who is told what (tenancy). A change to a public or unlisted item may be told to every
agent. A change to a private item is told only to agents whose caller may read the
namespace it is in (a member of it, or an admin), asked of the registry as that caller
(`whoami`, once per caller per batch); if that cannot be asked, the agent is not told.
The notification itself names nothing but a URI the agent subscribed to. A subscription
is resolved to the entry's uuid as the subscribing caller, under RLS, so a URI the caller
cannot read is honoured (the protocol says so) but never fires; one not yet published is
resolved again (at most MAX_RESOLVES_PER_BATCH of them) when knowledge the caller can see
changes. A versioned URI fires on any change to its entry (a newer version, a yank), which
is at worst one needless re-read.

Two eras of the protocol are served. Handshake-era connections (2025-11-25 and before)
are tracked by a middleware from their first request and told on their standalone
channel (the GET stream over HTTP), subscribing with `resources/subscribe`. 2026-07-28
clients open `subscriptions/listen` streams; the SDK's ListenHandler serves them over a
bus (`_TenantBus`) that remembers each stream's caller and URIs and tells each only what
its caller may see. Every send is bounded by SEND_TIMEOUT_S and runs in the batcher's
task, so a slow agent delays no reply and no other agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types import (
    INVALID_PARAMS,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..errors import KiwiError
from ..principal import Principal, acting_as, anon, requested
from ..registry.base import Registry, Select
from ..registry.postgres import PostgresBackend
from .auth import request_principal
from .catalog.resources import parse_uri
from .registry_events import Change, RegistryEvents

__all__ = ["Notifier", "attach_notifications", "knowledge_ref"]

SEND_TIMEOUT_S = 2.0
MAX_SUBSCRIPTIONS = 256  # per connection or listen stream
MAX_RESOLVES_PER_BATCH = 16  # unresolved subscriptions looked up again, per watcher per batch
LIST_EVENTS: dict[str, ServerEvent] = {
    "tool": ToolsListChanged(),
    "directive": PromptsListChanged(),
    "knowledge": ResourcesListChanged(),
}

logger = logging.getLogger("kiwi.mcp.events")

Send = Callable[[ServerEvent], Awaitable[None]]
Readers = dict[Principal, frozenset[str] | None]
"""The private namespaces each caller reads (None: every one, an admin)."""


def knowledge_ref(uri: str) -> str | None:
    """The reference a `kiwi://knowledge/<ref>[@<version>]` URI names (read as resources/read
    reads it, catalog/resources.py), else None."""
    parsed = parse_uri(uri)
    return parsed[0] if parsed else None


@dataclass(eq=False)
class Watcher:
    """One agent that may be told of changes: whom it acts as, what it subscribed to (URI ->
    the entry's uuid, None while unresolved), and how it is reached."""

    principal: Principal
    send: Send
    uris: dict[str, str | None] = field(default_factory=dict)


class Notifier:
    """The agents connected to one server, and what each is told of a batch of changes."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.watchers: dict[object, Watcher] = {}
        self.events: RegistryEvents | None = None
        """The process's listener, when there is a database to listen to."""

    def caller(self) -> Principal:
        """Whom the request being served acts as: its verified HTTP caller, else the principal
        the server acts as (stdio), else the registry's own."""
        own = getattr(self.registry, "principal", None)
        return request_principal() or requested() or (own if isinstance(own, Principal) else anon())

    async def deliver(self, batch: frozenset[Change]) -> None:
        """Tell every watcher what of `batch` its caller may see, all at once, each bounded.
        Which namespaces each caller reads is asked once per caller, only for a batch that
        holds a private change."""
        watchers = list(self.watchers.values())
        readers: Readers = {}
        if not all(c.public for c in batch):
            principals = list({w.principal for w in watchers})
            found = await asyncio.gather(*(self._namespaces_of(p) for p in principals))
            readers = dict(zip(principals, found, strict=True))
        async with anyio.create_task_group() as tg:
            for watcher in watchers:
                tg.start_soon(self._tell, watcher, batch, readers)

    async def _tell(self, watcher: Watcher, batch: frozenset[Change], readers: Readers) -> None:
        try:
            events = await self._events_for(watcher, batch, readers)
            for event in events:
                with anyio.move_on_after(SEND_TIMEOUT_S):
                    await watcher.send(event)
        except Exception:  # one agent's failure is not another's
            logger.exception("telling an agent of registry changes failed")

    async def _events_for(self, watcher: Watcher, batch: frozenset[Change], readers: Readers) -> list[ServerEvent]:
        namespaces = readers.get(watcher.principal, frozenset())
        visible = [c for c in batch if c.public or namespaces is None or c.namespace in namespaces]
        everything = any(c.kind == "*" for c in visible)
        kinds = set(LIST_EVENTS) if everything else {c.kind for c in visible}
        events = [LIST_EVENTS[k] for k in ("tool", "directive", "knowledge") if k in kinds]
        ids = {c.id for c in visible if c.kind == "knowledge" and c.id}
        if not (everything or ids):
            return events
        tries = MAX_RESOLVES_PER_BATCH
        for uri, target in list(watcher.uris.items()):
            if target is None and tries > 0 and knowledge_ref(uri):  # not yet published, or not yet readable
                tries -= 1
                target = watcher.uris[uri] = await self.resolve(uri, watcher.principal)
            if target is not None and (everything or target in ids):
                events.append(ResourceUpdated(uri=uri))
        return events

    async def _namespaces_of(self, principal: Principal) -> frozenset[str] | None:
        if principal.is_admin:
            return None
        if principal.role == "anon":
            return frozenset()
        try:
            with acting_as(principal):
                me = await self.registry.whoami()
        except KiwiError as exc:  # cannot tell: tell nothing private
            logger.info("registry notifications: whoami failed: %s", exc)
            return frozenset()
        if me.get("is_admin"):
            return None
        return frozenset(str(m.get("namespace")) for m in me.get("namespaces") or ())

    async def resolve(self, uri: str, principal: Principal) -> str | None:
        """The uuid of the knowledge entry `uri` names, if `principal` may read it."""
        ref = knowledge_ref(uri)
        if ref is None:
            return None
        try:
            with acting_as(principal):
                rows = await self.registry.backend.call(
                    "tools", {"ref": ref}, returns=Select(order=("ref",), limit=1), read=True
                )
        except KiwiError as exc:
            logger.info("registry notifications: cannot resolve %s: %s", uri, exc)
            return None
        row = rows[0] if rows else None
        return str(row["id"]) if row and row.get("tool_type") == "knowledge" else None

    def subscribe(self, watcher: Watcher, uri: str, target: str | None) -> None:
        if uri not in watcher.uris and len(watcher.uris) >= MAX_SUBSCRIPTIONS:
            raise MCPError(INVALID_PARAMS, f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per connection")
        watcher.uris[uri] = target


# --- the handshake era: connections told on their standalone channel -------------------


def _connection_send(connection: Any) -> Send:
    async def send(event: ServerEvent) -> None:
        if isinstance(event, ToolsListChanged):
            await connection.send_tool_list_changed()
        elif isinstance(event, PromptsListChanged):
            await connection.send_prompt_list_changed()
        elif isinstance(event, ResourcesListChanged):
            await connection.send_resource_list_changed()
        else:
            await connection.send_resource_updated(event.uri)

    return send


class _TrackConnections:
    """Middleware: every handshake-era connection becomes a watcher at its first request
    (forgotten when it closes); its caller is the latest request's."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        self.watcher_of(ctx)
        return await call_next(ctx)

    def watcher_of(self, ctx: ServerRequestContext[Any, Any]) -> Watcher | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        connection = getattr(ctx.session, "_connection", None)  # the SDK keeps it private
        if connection is None:
            return None
        watchers = self.notifier.watchers
        watcher = watchers.get(connection)
        if watcher is None:
            watcher = watchers[connection] = Watcher(self.notifier.caller(), _connection_send(connection))
            connection.exit_stack.callback(watchers.pop, connection, None)
        else:
            watcher.principal = self.notifier.caller()
        return watcher


def _subscription_handlers(notifier: Notifier, track: _TrackConnections) -> tuple[Any, Any]:
    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        watcher = track.watcher_of(ctx)
        if watcher is not None:
            uri = str(params.uri)
            notifier.subscribe(watcher, uri, await notifier.resolve(uri, watcher.principal))
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        watcher = track.watcher_of(ctx)
        if watcher is not None:
            watcher.uris.pop(str(params.uri), None)
        return EmptyResult()

    return subscribe, unsubscribe


# --- the 2026-07-28 era: subscriptions/listen streams ----------------------------------

_listening: contextvars.ContextVar[tuple[Principal, tuple[str, ...]] | None] = contextvars.ContextVar(
    "kiwi_listen_stream", default=None
)


class _TenantBus:
    """The SubscriptionBus the SDK's ListenHandler serves streams from: `subscribe` (called
    inside the listen request) makes the stream a watcher with its caller and URIs."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    async def publish(self, event: ServerEvent) -> None:
        """An event the server's own code raises (`ctx.notify_*`): it carries no tenant, so
        only list changes pass, to every stream."""
        if not isinstance(event, ResourceUpdated):
            for watcher in [w for key, w in self.notifier.watchers.items() if isinstance(key, _StreamKey)]:
                await watcher.send(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        principal, uris = _listening.get() or (self.notifier.caller(), ())
        key = _StreamKey()

        async def send(event: ServerEvent) -> None:
            listener(event)

        self.notifier.watchers[key] = Watcher(principal, send, dict.fromkeys(uris[:MAX_SUBSCRIPTIONS]))

        def unsubscribe() -> None:
            self.notifier.watchers.pop(key, None)

        return unsubscribe


class _StreamKey:
    """The key of one listen stream among the watchers."""


def _listen_handler(notifier: Notifier) -> Any:
    handler = ListenHandler(_TenantBus(notifier))

    async def listen(ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams) -> Any:
        uris = tuple(params.notifications.resource_subscriptions or ())
        reset = _listening.set((notifier.caller(), uris))
        try:
            return await handler(ctx, params)
        finally:
            _listening.reset(reset)

    return listen


# --- wiring ----------------------------------------------------------------------------


def database_url_of(registry: Registry) -> str | None:
    """The URL of the database a Postgres registry talks to; None for any other backend (the
    REST backend hears no notifications)."""
    backend = registry.backend
    return getattr(backend, "_url", None) if isinstance(backend, PostgresBackend) else None


def attach_notifications(
    server: MCPServer,
    registry: Registry,
    notifier: Notifier | None = None,
    *,
    lists: NotificationOptions | None = None,
) -> Notifier:
    """Serve subscriptions on `server` and, when `registry` is over Postgres, tell its agents
    of the registry's changes: listChanged declared, one listener per process.

    `notifier` decides what a batch tells whom (default: `Notifier`, every list and
    subscription); `lists` which listChanged are declared (default: all three; without
    resources, resources/subscribe is not served). Direct mode passes its own (direct.py)."""
    database_url = database_url_of(registry)
    low = server._lowlevel_server  # the SDK's MCPServer offers no public seam for these
    notifier = notifier if notifier is not None else Notifier(registry)
    lists = lists if lists is not None else NotificationOptions(True, True, True)
    track = _TrackConnections(notifier)
    server.middleware.append(track)
    if lists.resources_changed:
        subscribe, unsubscribe = _subscription_handlers(notifier, track)
        low.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
        low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    low.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, _listen_handler(notifier))
    if database_url is None:
        return notifier
    events = RegistryEvents(database_url, notifier.deliver)
    notifier.events = events
    original_options = low.create_initialization_options

    def initialization_options(notification_options: NotificationOptions | None = None, *a: Any, **kw: Any) -> Any:
        changes = notification_options or lists
        return original_options(changes, *a, **kw)

    low.create_initialization_options = initialization_options  # type: ignore[method-assign]
    original_lifespan = low.lifespan

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with original_lifespan(app) as state, events.running():
            yield state

    low.lifespan = lifespan
    return notifier
