"""Pagination for the http_client primitive, declared as data in the tool's config: the run
fetches page after page and its output is every page's items, in order.

`config.paginate` says how the next page is found, one of:

* `next_link`: `header` (the response's `Link: <...>; rel="next"`) or a JSONPath to the next
  page's URL in the body (relative URLs are read against the page's own);
* `cursor` (a JSONPath to the next cursor in the body) with `cursor_param` (the query parameter
  it goes in); a cursor that is absent, empty or seen before ends the pages;
* `page_param` (a query parameter counted up from `first_page`, 1 by default); a page with no
  items ends the pages;

and `items` (a JSONPath to a page's items; without it a page that is a list is its items, any
other page one item), and `max_pages` (10; at most 1000): when more pages remain after that
many, the run ends with what it has, says so in a warning, and detail.pagination.more is true.

Each page is one request as the config builds it, with its own retries and redirects. A page
that fails ends the run with its error, naming the page. A next link is followed only on the
first page's origin (scheme, host and port): the request's headers, secrets among them, go
along, so a link elsewhere is an error, not a request.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urljoin

import httpx
import jsonpath

from ..errors import ConfigError
from .base import Outcome
from .linear_jsonpath import LINEAR_JSONPATH

__all__ = ["DEFAULT_MAX_PAGES", "MAX_PAGES", "PageSpec", "page_spec", "paginate"]

DEFAULT_MAX_PAGES = 10
MAX_PAGES = 1000
_KEYS = frozenset({"next_link", "cursor", "cursor_param", "page_param", "first_page", "items", "max_pages"})


class PageSpec(NamedTuple):
    kind: str  # next_link, cursor or page
    next_link: Any  # "header", or a compiled JSONPath
    cursor: Any  # a compiled JSONPath
    param: str | None  # cursor_param or page_param
    first_page: int
    items: Any  # a compiled JSONPath, or None
    max_pages: int


def page_spec(config: Mapping[str, Any], tool: str) -> PageSpec | None:
    """The config's `paginate`, checked before any request goes out (None: one request)."""
    raw = config.get("paginate")
    if raw is None:
        return None
    where = f"{tool}: config.paginate"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be an object, not {raw!r}")
    if unknown := sorted(set(raw) - _KEYS):
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}", hint=f"known: {', '.join(sorted(_KEYS))}")
    kinds = [k for k in ("next_link", "cursor", "page_param") if raw.get(k) is not None]
    if len(kinds) != 1:
        raise ConfigError(
            f"{where} needs exactly one of next_link, cursor or page_param (it has {', '.join(kinds) or 'none'})"
        )
    max_pages = raw.get("max_pages", DEFAULT_MAX_PAGES)
    if isinstance(max_pages, bool) or not isinstance(max_pages, int) or not 1 <= max_pages <= MAX_PAGES:
        raise ConfigError(f"{where}.max_pages must be a whole number from 1 to {MAX_PAGES}, not {max_pages!r}")
    first = raw.get("first_page", 1)
    if isinstance(first, bool) or not isinstance(first, int):
        raise ConfigError(f"{where}.first_page must be a whole number, not {first!r}")
    items = _path(raw.get("items"), f"{where}.items")
    kind = kinds[0]
    if kind == "next_link":
        link = raw["next_link"]
        found = "header" if link == "header" else _path(link, f"{where}.next_link")
        return PageSpec("next_link", found, None, None, first, items, max_pages)
    if kind == "cursor":
        param = raw.get("cursor_param")
        if not isinstance(param, str) or not param:
            raise ConfigError(f"{where}.cursor needs cursor_param: the query parameter the cursor goes in")
        return PageSpec("cursor", None, _path(raw["cursor"], f"{where}.cursor"), param, first, items, max_pages)
    param = raw["page_param"]
    if not isinstance(param, str) or not param:
        raise ConfigError(f"{where}.page_param must be the name of a query parameter, not {param!r}")
    return PageSpec("page", None, None, param, first, items, max_pages)


@functools.lru_cache(maxsize=256)
def _compiled(expression: str) -> Any:
    return LINEAR_JSONPATH.compile(expression)


def _path(expression: Any, where: str) -> Any:
    if expression is None:
        return None
    if not isinstance(expression, str):
        raise ConfigError(f"{where} must be a JSONPath, not {expression!r}")
    try:
        return _compiled(expression)
    except jsonpath.JSONPathError as exc:
        raise ConfigError(f"{where} {expression!r} is not a valid JSONPath: {exc}") from None


Send = Callable[[httpx.Request], Awaitable[Any]]  # a reply (with .response) or a failed Outcome
Parse = Callable[[Any, None], Outcome]


async def paginate(first: httpx.Request, spec: PageSpec, send: Send, parse: Parse) -> Outcome:
    """Fetches the pages; the outcome of the last one, its output every page's items."""
    request = _with_param(first, spec.param, spec.first_page) if spec.kind == "page" else first
    collected: list[Any] = []
    urls: list[str] = []
    cursors: set[str] = set()
    number = spec.first_page
    more = False
    while True:
        reply = await send(request)
        outcome = reply if isinstance(reply, Outcome) else parse(reply, None)
        urls.append(str(outcome.detail.get("url")))
        if outcome.status != "success":
            outcome.error = f"page {len(urls)}: {outcome.error}"
            outcome.detail["pagination"] = {"pages": len(urls), "urls": urls}
            return outcome
        page_items = _items(spec, outcome.output)
        if isinstance(page_items, str):
            outcome.status, outcome.error = "error", f"page {len(urls)}: {page_items}"
            return outcome
        collected.extend(page_items)
        following = _next(spec, request, reply, outcome.output, page_items, cursors, number)
        if isinstance(following, str):
            outcome.status, outcome.error = "error", f"page {len(urls)}: {following}"
            return outcome
        if following is None:
            break
        if len(urls) >= spec.max_pages:
            more = True
            break
        request, number = following, number + 1
    outcome.output = collected
    outcome.detail["pagination"] = {"pages": len(urls), "items": len(collected), "more": more, "urls": urls}
    if more:
        outcome.detail["warnings"] = [f"stopped after max_pages ({spec.max_pages}): more pages remain"]
    return outcome


def _items(spec: PageSpec, body: Any) -> list[Any] | str:
    """A page's items, or what is wrong with the page."""
    if spec.items is None:
        return body if isinstance(body, list) else [] if body is None else [body]
    if not isinstance(body, dict | list):
        return "paginate.items needs a JSON object or array in the response"
    matches = spec.items.findall(body)
    if len(matches) == 1 and isinstance(matches[0], list):
        return list(matches[0])
    return list(matches)


def _next(
    spec: PageSpec,
    request: httpx.Request,
    reply: Any,
    body: Any,
    items: list[Any],
    cursors: set[str],
    number: int,
) -> httpx.Request | str | None:
    """The next page's request; None when there is none; a text when it cannot be followed."""
    if spec.kind == "page":
        return _with_param(request, spec.param, number + 1) if items else None
    if spec.kind == "cursor":
        cursor = _first(spec.cursor, body)
        if cursor is None or cursor == "" or str(cursor) in cursors:
            return None
        cursors.add(str(cursor))
        return _with_param(request, spec.param, cursor)
    if spec.next_link == "header":
        link = reply.response.links.get("next", {}).get("url")
    else:
        link = _first(spec.next_link, body)
    if link is None or link == "":
        return None
    if not isinstance(link, str):
        return f"the next page's link is not a URL: {link!r}"
    url = httpx.URL(urljoin(str(reply.response.url), link))
    if _origin(url) != _origin(request.url):
        origin = f"{request.url.scheme}://{request.url.netloc.decode()}"
        return f"the next page's link {url.copy_with(query=None)} leaves {origin}: not followed"
    return _to(request, url)


def _first(path: Any, body: Any) -> Any:
    if not isinstance(body, dict | list):
        return None
    found = path.findall(body)
    return found[0] if found else None


def _with_param(request: httpx.Request, name: str | None, value: Any) -> httpx.Request:
    assert name is not None
    return _to(request, request.url.copy_set_param(name, value if isinstance(value, str) else str(value)))


def _to(request: httpx.Request, url: httpx.URL) -> httpx.Request:
    """The same request to another URL (of the same origin: its Host header holds)."""
    return httpx.Request(
        request.method, url, headers=request.headers, content=request.content, extensions=request.extensions
    )


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    defaults = {"http": 80, "https": 443}
    return url.scheme, url.host, url.port or defaults.get(url.scheme)
