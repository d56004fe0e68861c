"""Keep-alive HTTP/1.1 for model calls, on asyncio streams: one pool of connections per event loop (one
per process for a process that runs one loop — a run, a batch, a runner, a Temporal worker), at most
`HTTP_CONNECTIONS_PER_HOST` requests in flight to one host, TLS, and the environment's proxies as
std.http_get reads them. Only the standard library, so a runner needs no HTTP package to call a model.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
import weakref
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any

from .call_failures import CappedBody, ReplyTooLarge
from .http_get import HttpGetError

HTTP_CONNECTIONS_ENV = "STATEWRIGHT_HTTP_CONNECTIONS"
# Requests in flight to one host at once (each on its own connection), unless HTTP_CONNECTIONS_ENV says
# otherwise: enough for a thousand concurrent runs at a provider's latency, few enough for a file limit.
HTTP_CONNECTIONS_PER_HOST = 512
# An idle connection is dropped after this long: servers close theirs after 5 to 60 s, and a connection a
# server closed is only found out by using it.
_IDLE_SECONDS = 15.0
_HEAD_LIMIT = 65536  # bytes of a reply's status line and headers together
_READ_CHUNK = 65536
_ENCODINGS = ("", "identity", "gzip", "x-gzip", "deflate")


class HTTPReply:
    """A reply: its status, its headers (by lower-case name) and its whole body, decompressed."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class HTTPFailure(ConnectionError):
    """The exchange failed before a whole reply arrived (refused, reset, cut off, not HTTP); worth another
    try. `sent` says whether the request may have reached the server."""


class HTTPOrigin:
    """Where requests go — scheme, host, port — and how: through which proxy, with which TLS settings."""

    __slots__ = ("authority", "host", "port", "proxy", "tls")

    def __init__(self, scheme: str, host: str, port: int) -> None:
        self.tls = scheme == "https"
        self.host = host
        self.port = port
        default = 443 if self.tls else 80
        self.authority = (f"[{host}]" if ":" in host else host) + ("" if port == default else f":{port}")
        self.proxy = _proxy_for(scheme, host)

    @property
    def key(self) -> tuple[bool, str, int]:
        return (self.tls, self.host, self.port)

    def target(self, path: str) -> str:
        """The request target for `path`: the path itself, or the whole URL to a plain-http proxy."""
        if self.proxy is not None and not self.tls:
            return f"http://{self.authority}{path}"
        return path

    def proxy_header(self) -> str:
        """The credentials a plain-http proxy is sent with every request (an https one gets them once, in
        the CONNECT that opens its tunnel)."""
        if self.proxy is None or not self.proxy[2] or self.tls:
            return ""
        return f"Proxy-Authorization: {self.proxy[2]}\r\n"


class HTTPPool:
    """The connections of one event loop, by origin; see the module's docstring."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self.hosts: dict[tuple[bool, str, int], _Host] = {}
        self.closed = False
        self._watch: AsyncIterator[None] | None = None

    async def exchange(self, origin: HTTPOrigin, request: bytes, cap: int) -> HTTPReply:
        """Send `request` (head and body, whole) to `origin` and read its reply, the body held to `cap`
        bytes decompressed. A kept-alive connection the server closed meanwhile is replaced at once;
        every other failure is the caller's to retry (HTTPFailure, ReplyTooLarge)."""
        host = self.hosts.get(origin.key)
        if host is None:
            host = self.hosts[origin.key] = _Host(origin, self.per_host)
        async with host.slots:
            while True:
                connection = host.idle_connection()
                reused = connection is not None
                if connection is None:
                    connection = await host.connect()
                keep = False
                try:
                    reply, keep = await _exchange(connection, request, cap, reused)
                except _StaleConnection:
                    continue  # the server closed a kept-alive connection before it read the request
                finally:
                    if keep and not self.closed:
                        host.keep(connection)
                    else:
                        connection[1].close()
                return reply

    def close(self) -> None:
        """Close every idle connection (the loop is ending); requests in flight close their own."""
        self.closed = True
        for host in self.hosts.values():
            while host.idle:
                host.idle.pop()[1].close()


# One pool per event loop: a connection belongs to the loop that opened it.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, HTTPPool] = weakref.WeakKeyDictionary()


async def http_pool() -> HTTPPool:
    """The running loop's pool, made on first use; its idle connections are closed when the loop shuts
    down (an async generator the loop closes in `shutdown_asyncgens`, as `asyncio.run` does at its end)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None or pool.closed:
        pool = _pools[loop] = HTTPPool(http_connections_per_host())
        pool._watch = _closed_with_loop(pool)
        await pool._watch.__anext__()
    return pool


async def _closed_with_loop(pool: HTTPPool) -> AsyncIterator[None]:
    try:
        yield
    finally:
        pool.close()


def http_connections_per_host() -> int:
    """HTTP_CONNECTIONS_ENV when it holds a whole number from 1, else HTTP_CONNECTIONS_PER_HOST."""
    text = os.environ.get(HTTP_CONNECTIONS_ENV, "").strip()
    if text.isdigit() and int(text) >= 1:
        return int(text)
    return HTTP_CONNECTIONS_PER_HOST


# (reader, writer, when it was last put back)
_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter, float]


class _Slots:
    """At most `size` holders at once; the others wait, and are let in in the order they came.

    Not asyncio.Semaphore: its `acquire` asks `locked()`, which walks every waiter, so with hundreds of
    calls waiting for a host each one cost as much as all of them (a thousand runs at once spent a third
    of their time there). Here a slot that is given back goes straight to the first waiter."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def __aenter__(self) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # a slot was handed over as this call was cancelled: hand it on
            raise  # (a waiter cancelled before that stays in the queue, done, and is passed over)

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class _Host:
    """One origin's idle connections (the most recently used first) and its bound on requests at once."""

    def __init__(self, origin: HTTPOrigin, per_host: int) -> None:
        self.origin = origin
        self.slots = _Slots(per_host)
        self.idle: list[_Connection] = []

    def idle_connection(self) -> _Connection | None:
        now = time.monotonic()
        while self.idle:
            connection = self.idle.pop()
            if now - connection[2] < _IDLE_SECONDS and not connection[0].at_eof() \
                    and not connection[1].is_closing():
                return connection
            connection[1].close()
        return None

    def keep(self, connection: _Connection) -> None:
        self.idle.append((connection[0], connection[1], time.monotonic()))

    async def connect(self) -> _Connection:
        origin = self.origin
        try:
            if not origin.tls:
                near = origin.proxy[:2] if origin.proxy else (origin.host, origin.port)  # a proxy, or the host
                reader, writer = await asyncio.open_connection(near[0], near[1], limit=_HEAD_LIMIT)
            elif origin.proxy is None:
                reader, writer = await asyncio.open_connection(
                    origin.host, origin.port, ssl=http_tls_context(), server_hostname=origin.host,
                    limit=_HEAD_LIMIT)
            else:
                reader, writer = await _tunnelled(origin)
        except OSError as exc:
            raise HTTPFailure(f"cannot connect to {origin.authority}: {exc.strerror or exc}") from None
        return reader, writer, 0.0


async def _tunnelled(origin: HTTPOrigin) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    from .http_get import _tunnel

    assert origin.proxy is not None
    host = origin.host
    destination = f"[{host}]:{origin.port}" if ":" in host else f"{host}:{origin.port}"
    tunnel = await _tunnel(origin.proxy, destination)
    try:
        return await asyncio.open_connection(sock=tunnel, ssl=http_tls_context(), server_hostname=host,
                                             limit=_HEAD_LIMIT)
    except BaseException:
        tunnel.close()
        raise


class _StaleConnection(Exception):
    """A kept-alive connection turned out closed before any of the reply came: use a new one."""


async def _exchange(connection: _Connection, request: bytes, cap: int,
                         reused: bool) -> tuple[HTTPReply, bool]:
    """One request on one connection: (the reply, whether the connection can be used again)."""
    reader, writer = connection[0], connection[1]
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if reused and not exc.partial:
            raise _StaleConnection from None
        raise HTTPFailure("the server closed the connection before its reply was complete") from None
    except asyncio.LimitOverrunError:
        raise HTTPFailure(f"the reply's headers are larger than {_HEAD_LIMIT:,} bytes") from None
    except OSError as exc:
        if reused:
            raise _StaleConnection from None
        raise HTTPFailure(f"the connection failed: {exc.strerror or exc}") from None
    status, keep, headers = _head(head)
    while 100 <= status < 200:  # "100 Continue" and the like come before the reply
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            raise HTTPFailure("the server closed the connection before its reply was complete") from None
        status, keep, headers = _head(head)
    try:
        body, delimited = await _body(reader, headers, status, cap)
    except asyncio.IncompleteReadError as exc:
        raise HTTPFailure(f"the reply was cut off after {len(exc.partial):,} more bytes") from None
    except OSError as exc:
        raise HTTPFailure(f"the connection failed while the reply was read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a broken chunk size or compressed stream
        raise HTTPFailure(str(exc)) from None
    return HTTPReply(status, headers, body), keep and delimited


def _head(head: bytes) -> tuple[int, bool, dict[str, str]]:
    """(status, whether the server keeps the connection open, headers by lower-case name)."""
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0]
    if not status_line.startswith("HTTP/1.") or len(status_line) < 12 or not status_line[9:12].isdigit():
        raise HTTPFailure(f"the reply is not HTTP/1.x: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep and name:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    connection = headers.get("connection", "").lower()
    keep = "keep-alive" in connection if status_line.startswith("HTTP/1.0") else "close" not in connection
    return int(status_line[9:12]), keep, headers


async def _body(reader: asyncio.StreamReader, headers: dict[str, str], status: int,
                cap: int) -> tuple[bytes, bool]:
    """The reply's body, decompressed and held to `cap` bytes, and whether its end was marked (by a length
    or a last chunk: the connection can carry another request) rather than by the connection closing."""
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in _ENCODINGS:
        raise ValueError(f"the reply is encoded as {encoding[:40]!r}, which was not asked for")
    body = CappedBody(cap, encoding)
    if status in (204, 304):
        return b"", True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        await _chunks(reader, body)
        return body.whole(), True
    length_text = headers.get("content-length")
    if length_text is not None:
        try:
            length = int(length_text.split(",")[0])
        except ValueError:
            raise ValueError(f"the reply's Content-Length is not a number: {length_text[:40]!r}") from None
        if body.inflate is None and length > cap:
            raise ReplyTooLarge(f"the reply is larger than the cap of {cap:,} bytes; it was not read")
        if length <= _READ_CHUNK:  # most replies: one read
            body.feed(await reader.readexactly(length))
            return body.whole(), True
        left = length
        wire = 0
        while left > 0 and not body.done:
            chunk = await reader.read(min(left, _READ_CHUNK))
            if not chunk:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(chunk)
            wire += len(chunk)
            _wire_cap(wire, cap)
            body.feed(chunk)
        return body.whole(), left == 0
    wire = 0
    while not body.done:
        chunk = await reader.read(_READ_CHUNK)
        if not chunk:
            break
        wire += len(chunk)
        _wire_cap(wire, cap)
        body.feed(chunk)
    return body.whole(), False


async def _chunks(reader: asyncio.StreamReader, body: CappedBody) -> None:
    wire = 0
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise asyncio.IncompleteReadError(b"", None)
        try:
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
        except ValueError:
            raise ValueError(f"a chunk of the reply has no valid size: {size_line[:40]!r}") from None
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers, up to the empty line
                pass
            return
        wire += size
        _wire_cap(wire, body.cap)
        body.feed(await reader.readexactly(size))
        await reader.readexactly(2)  # the CRLF after each chunk


def _wire_cap(wire: int, cap: int) -> None:
    """The bytes on the wire are held to the cap too: a compressed stream of empty blocks inflates to
    nothing, however long it is."""
    if wire > cap:
        raise ReplyTooLarge(f"the reply is larger than the cap of {cap:,} bytes; it was not read further")


@lru_cache(maxsize=1)
def http_tls_context() -> Any:
    """The TLS settings of every https connection (an ssl.SSLContext), made once: loading certificates takes
    milliseconds, and importing ssl too, which a runner that calls no https endpoint never does. The
    system's certificates, or those SSL_CERT_FILE or SSL_CERT_DIR name (as std.http_get verifies)."""
    import ssl

    return ssl.create_default_context()


def _proxy_for(scheme: str, host: str) -> tuple[str, int, str] | None:
    """The proxy the environment names for `host` (http_get reads `http_proxy`, `https_proxy` and
    `no_proxy`); nothing is read when no proxy variable is set."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return None
    from .http_get import _environment_proxy

    try:
        return _environment_proxy(scheme, host)
    except HttpGetError as exc:
        raise HTTPFailure(str(exc).removeprefix("std.http_get: ")) from None
