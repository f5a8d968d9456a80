"""The http_client primitive: an HTTP request per run (a page per request when it paginates),
described entirely by the merged config.

Config keys (all optional but a URL):

* `method` (GET), `url` or `url_template`, `query`, `headers`: templates holding `${VAR}`
  (the runner's environment) and `{name}` (the run's values; percent-encoded in the URL).
  A query or header entry that is null, renders empty, or names a value the run lacks is left out.
* `auth`: `{type: bearer, token}`, `{type: basic, username, password}` or
  `{type: api_key, name, value, in: header|query}`; an empty secret sends no auth.
* `body_template` (JSON, `"{n}"` keeps n's type), `body` (text); without either, POST, PUT
  and PATCH send the parameters as JSON.
* `follow_redirects` (`same_origin`; `true` or `false`) and `max_redirects` (5): the runner
  follows each hop itself and drops every secret on a hop to another origin (redirects.py).
* `timeout` (seconds, 30; per attempt, every hop included).
* `retries` (extra attempts, 0), `retry_delay` (seconds, 1; the wait before retry n is
  retry_delay * n, or what a `Retry-After` header asks, up to 60 s) and `retryable_statuses`
  ([502, 503, 504, 429]): a response with one of those statuses, a timeout or a connection
  error is tried again while attempts remain.
* `response_transform` (a JSONPath), `max_response_bytes` (10 MiB).
* `stream`, `stream_until`: a streamed response read piece by piece, each piece progress
  (http_stream.py); `paginate`: page after page, the output every page's items (http_pages.py).

Secrets: every value of a `${VAR}` the config refers to is replaced by `***` in `error`,
`detail` and raised errors, and in `output` when the run failed.

The pool is one httpx.AsyncClient. Its transport is aiohttp's connection pool when
aiohttp is installed (about three times the requests per second of httpcore's on one core:
bench/runner_bench.py), else httpx's own. The request goes out as httpx built it and
aiohttp's errors become the httpx errors httpcore raises (a refused connection is a
ConnectError), so retries, messages and the wire do not depend on the transport.
Proxies from the environment still go through httpx's own proxy transport.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from time import time
from typing import Any, NamedTuple
from urllib.parse import quote, quote_plus

import httpx
import jsonpath

from .. import telemetry
from ..core.expand import as_text, expand_vars, fill, fill_deep, variables_in
from ..core.identity import ByIdentity
from ..core.plan import Plan
from ..errors import ConfigError
from .base import Invocation, Outcome, Status
from .http_pages import page_spec, paginate
from .http_stream import Body, StreamSpec, read_body, stream_spec
from .http_transport import CookielessClient, default_transport, environment_proxies
from .linear_jsonpath import LINEAR_JSONPATH
from .redirects import RedirectPolicy, Redirects, Secrets, send_following
from .subprocess import seconds

DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRY_DELAY_S = 1.0
DEFAULT_RETRY_STATUSES = (502, 503, 504, 429)
MAX_RETRY_AFTER_S = 60.0  # the longest a server's Retry-After makes a run wait
_BODY_METHODS = {"POST", "PUT", "PATCH"}
_RETRYABLE = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
_VAR_REF = re.compile(r"(\$\{[^}]*\})")  # split point: ${...} is the environment's, the rest the run's
_WHOLE_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_EXCERPT = 300


class HttpClientPrimitive:
    """Runs http_client plans through one pooled AsyncClient shared by every run."""

    name = "http_client"

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None, *, max_connections: int = 100) -> None:
        self._transport = transport  # None: aiohttp's pool when installed, else httpcore's
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The shared pool, made on first use (so the primitive can be built outside a loop)."""
        if self._client is None or self._client.is_closed:
            transport, mounts = self._transport, None
            if transport is None and (pool := default_transport(self._limits)) is not None:
                # httpx reads HTTP(S)_PROXY, ALL_PROXY and NO_PROXY only for its own transport:
                # mount them beside ours, or keep httpx's own when they cannot be read.
                mounts = environment_proxies(self._limits)
                transport = pool if mounts is not None else None
            self._client = CookielessClient(transport=transport, mounts=mounts, limits=self._limits)
        return self._client

    def accepts(self, plan: Plan) -> bool:
        return plan.primitive == self.name

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def run(self, invocation: Invocation) -> Outcome:
        config = invocation.config
        redact = _Redactor(config, invocation.environ)
        transform = _compile_transform(config.get("response_transform"))
        policy = RedirectPolicy.from_config(config)
        try:
            request = _build_request(self.client, invocation)
        except (httpx.InvalidURL, httpx.HTTPError, ValueError) as exc:
            raise ConfigError(f"cannot build the HTTP request: {redact(str(exc))}") from None
        stream = stream_spec(config, invocation.plan.tool_id)
        pages = page_spec(config, invocation.plan.tool_id)
        send = functools.partial(self._send_with_retries, inv=invocation, redact=redact, policy=policy, stream=stream)
        if pages is None:
            reply = await send(request)
            outcome = reply if isinstance(reply, Outcome) else _outcome(reply, transform)
        else:
            outcome = await paginate(request, pages, send, _outcome)
            if outcome.status == "success" and transform is not None:
                with_transform(outcome, transform, usable=True)
        if outcome.status != "success":
            outcome.output = redact.deep(outcome.output)
        outcome.error = redact(outcome.error) if outcome.error else None
        outcome.detail = redact.deep(outcome.detail)
        return outcome

    async def _send_with_retries(
        self, request: httpx.Request, *, inv: Invocation, redact: _Redactor, policy: RedirectPolicy, stream: StreamSpec
    ) -> _Reply | Outcome:
        """Sends until a final answer: a response not worth retrying, the last attempt, or a hard failure.
        Redirects are followed within each attempt (a retry starts again from the first URL)."""
        config = inv.config
        retry = _RetryPolicy.of(config, inv.plan.tool_id)
        attempts = retry.attempts
        timeout = seconds(config, "timeout", DEFAULT_TIMEOUT_S, inv.plan.tool_id)
        limit = int(config.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES))
        url = _display_url(request.url)
        secrets = functools.partial(Secrets, config, inv.environ, request)

        for attempt in range(1, attempts + 1):
            redirects = Redirects(policy, secrets)
            try:
                async with asyncio.timeout(timeout):
                    response = await send_following(self.client, request, redirects)
                    try:
                        told = inv.on_progress if response.is_success else None
                        body = await read_body(response, limit, stream, _redacted(told, redact))
                    finally:
                        await response.aclose()
            except (TimeoutError, *_RETRYABLE) as exc:
                timed_out = isinstance(exc, TimeoutError | httpx.TimeoutException)
                what = f"timed out after {timeout:g} s" if timed_out else f"{type(exc).__name__}: {exc}"
                if attempt < attempts:
                    await _pause(inv, what, retry.delay(attempt), attempt, attempts, redact)
                    continue
                message = f"{request.method} {_path(url, redirects)} {what} (attempt {attempt} of {attempts})"
                return _failure("timeout" if timed_out else "error", message, url, attempt)
            except httpx.HTTPError as exc:  # not worth retrying: a bad scheme, a protocol violation
                message = f"{request.method} {_path(url, redirects)}: {type(exc).__name__}: {exc}"
                return _failure("error", message, url, attempt)

            if response.status_code in retry.statuses and attempt < attempts:
                delay = _retry_after(response, MAX_RETRY_AFTER_S)
                delay = retry.delay(attempt) if delay is None else delay
                await _pause(inv, f"HTTP {response.status_code}", delay, attempt, attempts, redact)
                continue
            return _Reply(response, body, limit, attempt, _display_url(response.request.url), redirects)
        raise AssertionError("unreachable: the last attempt always returns")


class _RetryPolicy(NamedTuple):
    """The config's `retries`, `retry_delay` and `retryable_statuses`, checked."""

    attempts: int  # 1 + retries
    delay_s: float
    statuses: frozenset[int]

    @classmethod
    def of(cls, config: Mapping[str, Any], tool: str) -> _RetryPolicy:
        retries = config.get("retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(
                f"{tool}: config.retries must be a whole number of extra attempts (0 or more), not {retries!r}"
            )
        delay = config.get("retry_delay", DEFAULT_RETRY_DELAY_S)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not (0 <= delay < math.inf):
            raise ConfigError(f"{tool}: config.retry_delay must be a number of seconds (0 or more), not {delay!r}")
        statuses = config.get("retryable_statuses", DEFAULT_RETRY_STATUSES)
        if not isinstance(statuses, list | tuple) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in statuses
        ):
            raise ConfigError(
                f"{tool}: config.retryable_statuses must be a list of HTTP status codes (100-599), not {statuses!r}",
                hint="for example retryable_statuses: [502, 503, 504, 429]",
            )
        return cls(retries + 1, float(delay), frozenset(statuses))

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt `attempt` (1 for the first): it grows linearly."""
        return self.delay_s * attempt


class _Reply(NamedTuple):
    """The final response of a run, its body already read (and maybe cut)."""

    response: httpx.Response
    body: Body
    limit: int
    attempts: int
    url: str
    redirects: Redirects


class _Redactor:
    """Replaces the values of the config's ${VAR}s (raw and percent-encoded) by ***."""

    def __init__(self, config: Mapping[str, Any], environ: Mapping[str, str]) -> None:
        forms: set[str] = set()
        for name in _variables_of(config):
            value = environ.get(name)
            if value:
                forms |= _written_forms(value)
        self._secrets = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def deep(self, value: Any) -> Any:
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        return value


_variables_of = ByIdentity(lambda config: frozenset(variables_in(config)))  # a cached plan's config: once


@functools.lru_cache(maxsize=1024)
def _written_forms(value: str) -> frozenset[str]:
    """A secret as a run may write it: raw, and percent-encoded for a path or a query."""
    return frozenset({value, quote(value, safe=""), quote_plus(value, safe="")})


class _Templates:
    """Renders config templates: ${VAR} from the environment, {name} from the run, in one pass,
    so a parameter holding '${SECRET}' is never expanded and a secret is never read as a placeholder."""

    def __init__(self, inv: Invocation) -> None:
        self.environ = inv.environ
        self.values = inv.values()
        self.url_values = {k: quote(as_text(v), safe="") for k, v in self.values.items() if v is not None}

    def text(self, template: Any, *, strict: bool = True, url: bool = False) -> str:
        if not isinstance(template, str):
            return as_text(template)
        values = self.url_values if url else self.values
        parts = _VAR_REF.split(template)
        return "".join(
            expand_vars(p, self.environ) if i % 2 else fill(p, values, strict=strict) for i, p in enumerate(parts)
        )

    def deep(self, value: Any) -> Any:
        if isinstance(value, str):
            return fill_deep(value, self.values) if "${" not in value else self.text(value, strict=False)
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        return value

    def entries(self, mapping: Mapping[str, Any] | None) -> dict[str, str]:
        """Query or header entries. One that is null (a tool dropping an inherited entry), names an
        absent value or renders empty is left out."""
        out: dict[str, str] = {}
        for key, template in (mapping or {}).items():
            whole = _WHOLE_PLACEHOLDER.fullmatch(template) if isinstance(template, str) else None
            if template is None or (whole and self.values.get(whole.group(1)) is None):
                continue
            value = self.text(template)
            if value:
                out[key] = value
        return out


def _build_request(client: httpx.AsyncClient, inv: Invocation) -> httpx.Request:
    config = inv.config
    t = _Templates(inv)
    method = str(config.get("method") or "GET").upper()
    url_template = config.get("url_template") or config.get("url")
    if not url_template:
        raise ConfigError("http_client config has no url or url_template", hint="add url: https://... to the config")
    url = t.text(url_template, url=True)
    query = t.entries(config.get("query"))
    headers = t.entries(config.get("headers"))
    _add_auth(config.get("auth"), t, headers, query)
    telemetry.inject(headers)  # the run's trace goes on with the API (traceparent), when telemetry is on

    kwargs: dict[str, Any] = {}
    if "body_template" in config:
        kwargs["json"] = t.deep(config["body_template"])
    elif "body" in config:
        kwargs["content"] = t.text(config["body"], strict=False).encode()
    elif method in _BODY_METHODS:
        kwargs["json"] = inv.params
    timeout = seconds(config, "timeout", DEFAULT_TIMEOUT_S, inv.plan.tool_id)
    # values in UTF-8 (a parameter may not be ASCII); names in ASCII, as httpx encodes them
    raw_headers = [(k.encode("ascii"), v.encode()) for k, v in headers.items()]
    return httpx.Request(
        method,
        url,
        params=query or None,
        headers=_with_defaults(client.headers, raw_headers),
        extensions={"timeout": httpx.Timeout(timeout).as_dict()},
        **kwargs,
    )


def _with_defaults(defaults: httpx.Headers, given: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's default headers (User-Agent, Accept, ...) but those the config sets, then the
    config's: what client.build_request merges, without parsing the URL and headers twice more."""
    named = {name.lower() for name, _ in given}
    return [(name, value) for name, value in defaults.raw if name.lower() not in named] + given


def _add_auth(auth: Mapping[str, Any] | None, t: _Templates, headers: dict[str, str], query: dict[str, str]) -> None:
    """Adds the auth the config asks for, unless its secret renders empty (an optional credential)."""
    if not auth:
        return
    kind = auth.get("type")
    if kind == "bearer":
        token = t.text(auth.get("token", ""))
        if token:
            headers["Authorization"] = f"Bearer {token}"
    elif kind == "basic":
        username, password = t.text(auth.get("username", "")), t.text(auth.get("password", ""))
        if username or password:
            pair = base64.b64encode(f"{username}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
    elif kind == "api_key":
        name, value, place = auth.get("name"), t.text(auth.get("value", "")), auth.get("in", "header")
        if not name or place not in ("header", "query"):
            raise ConfigError("api_key auth needs a name and in: header or in: query")
        if value:
            (headers if place == "header" else query)[name] = value
    else:
        raise ConfigError(f"unknown auth type {kind!r}", hint="use bearer, basic or api_key")


def _outcome(reply: _Reply, transform: tuple[str, Any] | None) -> Outcome:
    """Turns the final response into an Outcome: parsed body (or the pieces of a streamed one),
    HTTP errors, the cut, the transform."""
    response, read = reply.response, reply.body
    text = read.raw.decode(_encoding(response), errors="replace")
    body: Any = None
    is_json = False
    if read.items is not None and response.is_success:
        body, is_json = read.items, True
    elif text.strip() and not read.truncated:
        try:
            body, is_json = json.loads(text), True
        except ValueError:
            body = text
    elif text.strip():
        body = text
    detail = {
        "http_status": response.status_code,
        "headers": dict(response.headers),
        "body": body,
        "attempts": reply.attempts,
        "truncated": read.truncated,
        "url": reply.url,
    }
    if read.format != "off":
        detail["stream"] = {"format": read.format, "pieces": read.pieces}
    if reply.redirects.hops:
        detail["redirects"] = reply.redirects.hops
    problems: list[str] = []
    status: Status = "success"
    if not response.is_success:
        status = "error"
        excerpt = text[:_EXCERPT] + ("…" if len(text) > _EXCERPT else "")
        where = f"HTTP {response.status_code} {response.reason_phrase} from {response.request.method} {reply.url}"
        problems.append(f"{where}: {excerpt}" if excerpt else where)
    if reply.redirects.refused:
        detail["redirect_refused"] = reply.redirects.refused
        problems.insert(0, reply.redirects.refused)
    if read.truncated:
        detail["warning"] = f"response body cut at {reply.limit} bytes (max_response_bytes)"
        problems.append(detail["warning"])
    outcome = Outcome(status=status, output=body, error="; ".join(problems) or None, detail=detail)
    if status == "success" and transform is not None:
        with_transform(outcome, transform, usable=is_json and not isinstance(body, str))
    return outcome


def _encoding(response: httpx.Response) -> str:
    """The body's text encoding: its Content-Type's charset, else UTF-8 (httpx's default), without
    parsing a Content-Type that names no charset."""
    if "charset" not in response.headers.get("content-type", "").lower():
        return "utf-8"
    return response.encoding or "utf-8"


def with_transform(outcome: Outcome, transform: tuple[str, Any], *, usable: bool) -> None:
    """The output replaced by what the response_transform picks from it, or the run an error.
    `usable`: the output is parsed JSON (python-jsonpath would parse a str as JSON text)."""
    expression, path = transform
    matches = path.findall(outcome.output) if usable else []
    problem = None
    if not usable:
        problem = f"response_transform {expression} needs a JSON object or array in the response"
    elif not matches:
        problem = f"response_transform {expression} matched nothing in the response"
    if problem is not None:
        outcome.status = "error"
        outcome.error = "; ".join([problem, *([outcome.error] if outcome.error else [])])
    else:
        outcome.output = matches[0] if len(matches) == 1 else matches


def _redacted(progress: Callable[[str], None] | None, redact: _Redactor) -> Callable[[str], None] | None:
    if progress is None:
        return None
    return lambda text: progress(redact(text))


@functools.lru_cache(maxsize=256)
def _compile_path(expression: str) -> Any:
    return LINEAR_JSONPATH.compile(expression)


def _compile_transform(expression: Any) -> tuple[str, Any] | None:
    """Compiled before the request is sent, so a bad expression fails before any side effect."""
    if expression is None:
        return None
    try:
        return str(expression), _compile_path(str(expression))
    except jsonpath.JSONPathError as exc:
        raise ConfigError(f"response_transform {expression!r} is not a valid JSONPath: {exc}") from None


def _failure(status: Status, message: str, url: str, attempts: int) -> Outcome:
    detail: dict[str, Any] = {
        "http_status": None,
        "headers": {},
        "body": None,
        "attempts": attempts,
        "truncated": False,
        "url": url,
    }
    return Outcome(status=status, error=message, detail=detail)


def _retry_after(response: httpx.Response, cap: float) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time()
        except (TypeError, ValueError):
            return None
    return min(cap, max(0.0, seconds))


async def _pause(inv: Invocation, why: str, delay: float, attempt: int, attempts: int, redact: _Redactor) -> None:
    if inv.on_progress is not None:
        inv.on_progress(redact(f"{why}, retrying in {delay:.1f} s (attempt {attempt + 1} of {attempts})"))
    await asyncio.sleep(delay)


def _path(url: str, redirects: Redirects) -> str:
    """The first URL, and the hop a failure happened at when redirects were followed."""
    return f"{url} -> {redirects.hops[-1]['url']}" if redirects.hops else url


def _display_url(url: httpx.URL) -> str:
    """The URL as errors and detail show it: no user:password (secret values are redacted later)."""
    return str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
