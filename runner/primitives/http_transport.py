"""The http_client primitive's pool: aiohttp's connection pool behind httpx, when aiohttp is
installed (about three times the requests per second of httpcore's on one core), in a client
whose cookies keep nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx

__all__ = ["AiohttpTransport", "CookielessClient", "default_transport", "environment_proxies", "no_cookies"]


def default_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    """aiohttp's pool behind httpx, or None (httpx's own, httpcore) when aiohttp is not installed."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return None
    return AiohttpTransport(limits)


def environment_proxies(limits: httpx.Limits) -> dict[str, httpx.AsyncBaseTransport | None] | None:
    """The proxy mounts httpx makes from the environment when it picks the transport itself
    (None for a NO_PROXY host: our transport); None when httpx no longer exposes them."""
    try:
        from httpx._utils import get_environment_proxies
    except ImportError:
        return None
    return {
        pattern: None if url is None else httpx.AsyncHTTPTransport(proxy=httpx.Proxy(url), limits=limits)
        for pattern, url in get_environment_proxies().items()
    }


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends httpx's requests through one aiohttp connection pool, as httpx built them: the
    URL byte for byte (not re-quoted), header names in their case, and no header of aiohttp's
    own (no default Content-Type). httpx keeps doing cookies, decoding and proxies
    (a proxied URL never reaches this transport); the runner follows redirects (redirects.py)."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._session: Any = None

    def _open(self) -> Any:
        import aiohttp

        connector = aiohttp.TCPConnector(
            limit=self._limits.max_connections or 0,
            keepalive_timeout=self._limits.keepalive_expiry,
            # made when the first request goes out (some 85 ms of CPU), as httpx's own transport
            # makes it: certifi, SSL_CERT_FILE
            ssl=httpx.create_ssl_context(),
        )
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("Content-Type",),
            auto_decompress=False,
            trust_env=False,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import aiohttp
        import yarl
        from multidict import CIMultiDict

        if self._session is None:
            self._session = self._open()
        timeout = request.extensions.get("timeout") or {}
        encoding = request.headers.encoding
        headers = CIMultiDict((k.decode(encoding), v.decode(encoding)) for k, v in request.headers.raw)
        with _as_httpx_errors():
            response = await self._session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),
                headers=headers,
                data=await request.aread() or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    sock_connect=timeout.get("connect"), sock_read=timeout.get("read"), connect=timeout.get("pool")
                ),
                server_hostname=request.extensions.get("sni_hostname"),
            )
        version = response.version
        extensions = {"http_version": f"HTTP/{version.major}.{version.minor}".encode() if version else b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class _Body(httpx.AsyncByteStream):
    """An aiohttp response body; closing it early closes its connection (aiohttp's release)."""

    def __init__(self, response: Any) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for chunk in self._response.content.iter_chunked(64 * 1024):
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """aiohttp's errors as the httpx errors httpcore raises for the same failure."""
    import aiohttp

    try:
        yield
    except aiohttp.ClientError as exc:
        table: list[tuple[type[BaseException], type[httpx.TransportError]]] = [
            (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
            (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
            (aiohttp.ServerTimeoutError, httpx.TimeoutException),
            (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS
            (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
            (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),  # a body cut short
            (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # a malformed response
            (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
            (aiohttp.ClientConnectionError, httpx.NetworkError),  # reset, broken pipe
        ]
        kind = next((to for frm, to in table if isinstance(exc, frm)), httpx.TransportError)
        raise kind(str(exc) or type(exc).__name__) from exc


def no_cookies() -> CookieJar:
    """A jar whose policy refuses every domain: under the pool's cookies (_NoCookies), should a
    cookie reach it anyway, it is never sent."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


class _NoCookies(httpx.Cookies):
    """Cookies that neither take a response's Set-Cookie nor put a Cookie header on a request:
    httpx would otherwise wrap every response and request in urllib's shapes for the jar to
    refuse (a tenth of a run's CPU)."""

    def __init__(self) -> None:
        super().__init__(no_cookies())

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set_cookie_header(self, request: httpx.Request) -> None:
        return None


class CookielessClient(httpx.AsyncClient):
    """httpx's client with cookies that keep nothing (_NoCookies): one client serves every run
    of every caller, so a cookie one run was given must never ride along with another's (a tool
    sends the cookies it names in its headers)."""

    _none = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._none

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        raise TypeError("the http_client pool keeps no cookies: a tool sends the cookies it names in its headers")
