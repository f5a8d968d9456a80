"""Redirects for the http_client primitive, followed by the runner hop by hop so that no
secret leaves the origin it was meant for.

httpx, left to follow redirects itself, dropped only `Authorization` on a hop to another
host: a header such as `X-Api-Key: ${KEY}` went along (issue 13). The config decides:

* `follow_redirects`: `same_origin` (the default) follows a redirect only to the same
  scheme, host and port; `true` follows any http or https redirect; `false` none. A
  redirect that is not followed is the run's answer: an error that says why.
* `max_redirects` (5): one more is an error.

A hop to another origin (scheme, host or port differs from the request it answers) drops
`Authorization`, `Proxy-Authorization`, `Cookie`, the header of an `api_key` auth, every
header whose template refers to a `${VAR}`, and every other header, and every query value
of the new URL, that holds a `${VAR}`'s value (or the value of such a query entry); the
run's detail names what was dropped, by name only. What was dropped stays dropped on later
hops. Such a hop is refused when it would resend a body holding a secret (307, 308) or when
the new URL holds one outside its query; a redirect to a scheme other than http or https is
always refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, quote_plus

import httpx

from ..core.expand import variables_in
from ..errors import ConfigError

DEFAULT_MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_ALWAYS_DROPPED = frozenset({"authorization", "proxy-authorization", "cookie"})
_REBUILT = frozenset({"content-length", "transfer-encoding"})  # httpx recomputes them for the new body
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MIN_SECRET_LEN = 4  # as the run records: shorter values ("1", "on") would match ordinary text

Follow = Literal["none", "same_origin", "any"]
_FOLLOW: dict[Any, Follow] = {False: "none", "false": "none", "same_origin": "same_origin", True: "any", "true": "any"}


@dataclass(frozen=True)
class RedirectPolicy:
    """What a tool's config allows; read before the request is sent, so a bad value has no side effect."""

    follow: Follow = "same_origin"
    max_redirects: int = DEFAULT_MAX_REDIRECTS

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RedirectPolicy:
        value = config.get("follow_redirects", "same_origin")
        follow = _FOLLOW.get(value.lower() if isinstance(value, str) else value) if _hashable(value) else None
        if follow is None:
            raise ConfigError(
                f"follow_redirects must be true, false or same_origin, not {value!r}",
                hint="same_origin (the default) follows redirects that stay on the request's scheme, host and port",
            )
        limit = config.get("max_redirects", DEFAULT_MAX_REDIRECTS)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigError(f"max_redirects must be a whole number of at least 0, not {limit!r}")
        return cls(follow, limit)


def _hashable(value: Any) -> bool:
    return isinstance(value, str | bool | int | float) or value is None


class Secrets:
    """What must not leave the origin, read from the config (which entries refer to ${VAR}s)
    and the first request (what those entries rendered to)."""

    def __init__(self, config: Mapping[str, Any], environ: Mapping[str, str], request: httpx.Request) -> None:
        headers = {str(k).lower() for k, v in (config.get("headers") or {}).items() if variables_in(v)}
        query = {str(k) for k, v in (config.get("query") or {}).items() if variables_in(v)}
        auth = config.get("auth") or {}
        if auth.get("type") == "api_key" and auth.get("name"):
            # an api key is a credential even when written into the config as it is
            name = str(auth["name"])
            if auth.get("in") == "query":
                query.add(name)
            else:
                headers.add(name.lower())
        self.header_names = frozenset(headers)
        values = {environ[n] for n in variables_in(config) if environ.get(n)}
        values |= {v for k in headers if (v := request.headers.get(k))}
        sent_query = {v for k in query for v in request.url.params.get_list(k) if v}
        self.exact = frozenset(sent_query)  # a short query value is matched whole, never inside others
        values |= sent_query
        long = {v for v in values if len(v) >= _MIN_SECRET_LEN}
        self.texts = tuple(sorted({f for v in long for f in (v, quote(v, safe=""), quote_plus(v, safe=""))}))
        self.raw = tuple(t.encode() for t in self.texts)
        self.body_refers = bool(variables_in(config.get("body_template")) or variables_in(config.get("body")))

    def in_text(self, text: str) -> bool:
        return text in self.exact or any(t in text for t in self.texts)

    def in_bytes(self, data: bytes) -> bool:
        return any(t in data for t in self.raw)


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


def redirect_url(request: httpx.Request, location: str) -> httpx.URL:
    """The absolute URL a Location names (as httpx resolves it: relative, host-less, fragment)."""
    url = httpx.URL(location)
    if url.scheme and not url.host:
        url = url.copy_with(host=request.url.host)
    if url.is_relative_url:
        url = request.url.join(url)
    if request.url.fragment and not url.fragment:
        url = url.copy_with(fragment=request.url.fragment)
    return url


def redirect_method(method: str, status: int) -> str:
    """As browsers and httpx do: 303 and 302 become GET (not HEAD), a POST answered by 301 too."""
    if status in (302, 303) and method != "HEAD":
        return "GET"
    if status == 301 and method == "POST":
        return "GET"
    return method


@dataclass
class Redirects:
    """One attempt's redirects: the policy, what was dropped at each hop, and why one was not followed."""

    policy: RedirectPolicy
    secrets_of: Callable[[], Secrets]  # called on the first cross-origin hop only: most runs never pay for it
    hops: list[dict[str, Any]] = field(default_factory=list)
    refused: str | None = None
    _secrets: Secrets | None = None

    def next(self, client: httpx.AsyncClient, request: httpx.Request, response: httpx.Response) -> httpx.Request | None:
        """The request that follows `response`, or None when `response` is the answer (`refused` says
        why when it is a redirect that was not followed)."""
        location = response.headers.get("Location")
        if response.status_code not in REDIRECT_STATUSES or location is None:
            return None
        try:
            url = redirect_url(request, location)
        except httpx.InvalidURL:
            self._refuse("the redirect's Location is not a valid URL")
            return None
        where = f"redirect to {_shown(url)}"
        if url.scheme not in ("http", "https"):
            self._refuse(f"{where} refused: only http and https redirects are followed")
            return None
        if self.policy.follow == "none":
            self._refuse(f"{where} not followed (follow_redirects: false)")
            return None
        if len(self.hops) >= self.policy.max_redirects:
            limit = self.policy.max_redirects
            self._refuse(f"{where} not followed: more than {limit} redirects (max_redirects)")
            return None
        cross = origin(url) != origin(request.url)
        if cross and self.policy.follow == "same_origin":
            how = "follow_redirects: same_origin; true follows it without the config's secrets"
            self._refuse(f"{where} not followed: it leaves for another origin ({how})")
            return None
        method = redirect_method(request.method, response.status_code)
        body = request.content if method == request.method else b""
        hop: dict[str, Any] = {"status": response.status_code, "url": _shown(url), "cross_origin": cross}
        rebuilt = (_REBUILT | {"host"}) if cross else _REBUILT  # a Host the config set stays on its origin
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in rebuilt]
        if not body:
            headers = [(k, v) for k, v in headers if k.lower() != b"content-type"]
        if cross:
            secrets = self._secrets = self._secrets or self.secrets_of()
            if body and (secrets.body_refers or secrets.in_bytes(body)):
                self._refuse(f"{where} refused: it would resend a body holding a secret to another origin")
                return None
            if secrets.in_text(_outside_query(url)):
                self._refuse(f"{where} refused: its URL holds a secret outside the query")
                return None
            headers, hop["dropped_headers"] = _drop_headers(headers, secrets)
            url, hop["dropped_query"] = _drop_query(url, secrets)
            hop["url"] = _shown(url)
        self.hops.append(hop)
        return client.build_request(method, url, headers=headers, content=body or None, extensions=request.extensions)

    def _refuse(self, why: str) -> None:
        self.refused = why


async def send_following(client: httpx.AsyncClient, request: httpx.Request, redirects: Redirects) -> httpx.Response:
    """Sends `request` and each hop `redirects` allows; the last response is returned unread (open)."""
    while True:
        response = await client.send(request, stream=True, follow_redirects=False)
        follow = redirects.next(client, request, response)
        if follow is None:
            return response
        await response.aclose()
        request = follow


def _drop_headers(headers: list[tuple[bytes, bytes]], secrets: Secrets) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    kept: list[tuple[bytes, bytes]] = []
    dropped: list[str] = []
    for name, value in headers:
        lower = name.decode("latin-1").lower()
        if lower in _ALWAYS_DROPPED or lower in secrets.header_names or secrets.in_bytes(value):
            dropped.append(name.decode("latin-1"))
        else:
            kept.append((name, value))
    return kept, dropped


def _drop_query(url: httpx.URL, secrets: Secrets) -> tuple[httpx.URL, list[str]]:
    items = url.params.multi_items()
    kept = [(k, v) for k, v in items if not secrets.in_text(v)]
    if len(kept) == len(items):
        return url, []
    dropped = [k for k, v in items if secrets.in_text(v)]
    return url.copy_with(query=str(httpx.QueryParams(tuple(kept))).encode() or None), dropped


def _outside_query(url: httpx.URL) -> str:
    return "".join((url.userinfo.decode("latin-1"), url.path, url.fragment))


def _shown(url: httpx.URL) -> str:
    """A URL as detail and errors show it: no user:password (secret values are redacted later)."""
    return str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
