"""std.http_get: one GET under an allow list and one deadline, as a small HTTP/1.1 client on asyncio streams.

The whole call — name lookups, connections, TLS handshakes, every redirect, the headers and each byte of a
body, however slowly a server sends it — ends at one deadline. Every hop is checked against the allow list
before anything connects to it. Only the standard library is used, so runners stay standalone.
"""

from __future__ import annotations

import asyncio
import base64
import re
import socket
import urllib.parse
from collections.abc import Sequence
from email.message import Message
from typing import Any

HTTP_MAX_REDIRECTS = 10
# bytes of one header line, and of a reply's whole head
_LINE_LIMIT = 65536
_HEAD_LIMIT = 262144
_MAX_HEADERS = 200
_READ_CHUNK = 65536
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# what may stay unescaped in a request target: RFC 3986's unreserved and reserved characters (and `%`, for
# escapes already made); anything else — spaces, CR and LF among them — is percent-encoded
_TARGET_SAFE = "/%:@!$&'()*+,;=-._~?"
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[?[0-9A-Fa-f:.]+\]?")
_STATUS_LINE = re.compile(r"HTTP/1\.[01] (\d{3})(?: .*)?")


class HttpGetError(Exception):
    """A refused or failed fetch; the message is written to be shown to a model."""


def http_check_url(url: str, allow: list[str]) -> None:
    """Refuse a URL that is not http(s) or whose host is not in the allow list — before any connection."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise HttpGetError(f"std.http_get: {url!r} is not an http:// or https:// URL")
    host = parts.hostname
    if not host:
        raise HttpGetError(f"std.http_get: {url!r} names no host")
    if not _HOST.fullmatch(host):
        raise HttpGetError(f"std.http_get: {url!r} does not name a valid host")
    if not _host_allowed(host, allow):
        allowed = ", ".join(repr(str(entry)) for entry in allow) or "none (the machine's allow list is empty)"
        raise HttpGetError(f"std.http_get: host {host!r} is not allowed; allowed hosts: {allowed}")


def _host_allowed(host: str, allow: list[str]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allow:
        entry = str(entry).lower().rstrip(".")
        if host == entry or (entry.startswith("*.") and host.endswith(entry[1:])):
            return True
    return False


# (name, value, carries a secret): a header the machine adds to its requests
HttpHeader = tuple[str, str, bool]


async def http_get(url: str, allow: list[str], timeout: float, max_bytes: int, *,
                   headers: Sequence[HttpHeader] = (), query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """GET `url` and return {status, body}, following redirects to allowed hosts only, all of it within
    `timeout` seconds. An error status is a result; a refusal, a failure or the deadline is HttpGetError.

    `headers` go with every request; one that carries a secret is dropped once a redirect leaves the first
    URL's scheme, host and port (as curl and browsers drop credentials). `query` parameters are added to
    `url` itself, replacing parameters of the same names in it."""
    http_check_url(url, allow)
    if query:
        url = http_with_query(url, query)
    fetch = asyncio.ensure_future(_follow(url, allow, max_bytes, headers))
    try:
        done, _ = await asyncio.wait({fetch}, timeout=timeout)
    finally:
        if not fetch.done():
            fetch.cancel()  # the deadline, or the caller's own cancellation
            await asyncio.gather(fetch, return_exceptions=True)
    if not done:
        raise HttpGetError(f"std.http_get: {url!r} did not answer in full within {timeout:g} seconds (the "
                           "tool's timeout option, for the whole request); nothing was kept")
    return fetch.result()


def http_with_query(url: str, query: Sequence[tuple[str, str]]) -> str:
    """`url` with the query parameters added (percent-encoded), any of the same names in it removed."""
    parts = urllib.parse.urlsplit(url)
    names = {name for name, _ in query}
    kept = [piece for piece in parts.query.split("&") if piece
            and urllib.parse.unquote_plus(piece.partition("=")[0]) not in names]
    added = [f"{urllib.parse.quote(name, safe='')}={urllib.parse.quote(value, safe='')}" for name, value in query]
    return urllib.parse.urlunsplit(parts._replace(query="&".join([*kept, *added])))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme, (parts.hostname or "").lower().rstrip("."), port


async def _follow(url: str, allow: list[str], max_bytes: int, extra: Sequence[HttpHeader]) -> dict[str, Any]:
    first = url
    origin = _origin(url)
    for _ in range(HTTP_MAX_REDIRECTS + 1):
        same_origin = _origin(url) == origin
        sent = [(name, value) for name, value, secret in extra if same_origin or not secret]
        status, headers, data = await _exchange(url, max_bytes, sent)
        location = headers.get("location")
        if status in _REDIRECT_STATUSES and location:
            target = urllib.parse.urljoin(url, location.strip())
            try:
                http_check_url(target, allow)
            except HttpGetError as exc:
                raise HttpGetError(f"std.http_get: refused a redirect to {target!r}: {exc}") from None
            url = target
            continue
        return _result(status, headers, data, max_bytes)
    raise HttpGetError(f"std.http_get: {first!r} redirected more than {HTTP_MAX_REDIRECTS} times")


def _result(status: int, headers: dict[str, str], data: bytes, max_bytes: int) -> dict[str, Any]:
    message = Message()
    message["content-type"] = headers.get("content-type", "text/plain")
    charset = message.get_content_charset() or "utf-8"
    try:
        body = data[:max_bytes].decode(charset, errors="replace")
    except LookupError:
        body = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        body += f"\n[body truncated at {max_bytes} bytes]"
    return {"status": status, "body": body}


async def _exchange(url: str, max_bytes: int, extra: Sequence[tuple[str, str]] = ()
                    ) -> tuple[int, dict[str, str], bytes]:
    """One request and its reply: (status, headers by lower-case name, at most max_bytes + 1 body bytes)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    tls = parts.scheme == "https"
    try:
        port = parts.port or (443 if tls else 80)
    except ValueError:
        raise HttpGetError(f"std.http_get: {url!r} has an invalid port") from None
    authority = (f"[{host}]" if ":" in host else host) + ("" if port == (443 if tls else 80) else f":{port}")
    target = urllib.parse.quote(parts.path or "/", safe=_TARGET_SAFE)
    if parts.query:
        target += "?" + urllib.parse.quote(parts.query, safe=_TARGET_SAFE)
    proxy = _environment_proxy(parts.scheme, host)
    lines = []
    try:
        if proxy is not None and not tls:
            # a plain-http proxy takes the whole URL as the target
            lines.append(f"GET http://{authority}{target} HTTP/1.1")
            if proxy[2]:
                lines.append(f"Proxy-Authorization: {proxy[2]}")
        else:
            lines.append(f"GET {target} HTTP/1.1")
        agent = next((value for name, value in extra if name.lower() == "user-agent"), "statewright")
        lines += [f"Host: {authority}", f"User-Agent: {agent}", "Accept-Encoding: identity", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in extra if name.lower() != "user-agent"]
        reader, writer = await _open(host, port, authority, tls, proxy)
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
            await writer.drain()
            status, headers = await _read_head(reader)
            while 100 <= status < 200:  # "100 Continue" and the like come before the real reply
                status, headers = await _read_head(reader)
            data = b"" if status in (204, 304) else await _read_body(reader, headers, max_bytes)
        finally:
            writer.close()
    except HttpGetError:
        raise
    except (OSError, EOFError, ValueError, UnicodeError) as exc:
        reason = str(exc) or type(exc).__name__
        raise HttpGetError(f"std.http_get: could not fetch {url!r}: {reason}") from None
    return status, headers, data


def _environment_proxy(scheme: str, host: str) -> tuple[str, int, str] | None:
    """The proxy the environment names for this request (`http_proxy`, `https_proxy`, `no_proxy`), as
    (host, port, Proxy-Authorization value or "")."""
    import urllib.request  # only for the environment's proxy rules

    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise HttpGetError(f"std.http_get: the {scheme}_proxy setting {proxy!r} is not an http:// proxy")
    auth = ""
    if parts.username is not None:
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return parts.hostname, parts.port or 80, auth


async def _open(host: str, port: int, authority: str, tls: bool,
                proxy: tuple[str, int, str] | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not tls:
        where = (proxy[0], proxy[1]) if proxy is not None else (host, port)
        return await asyncio.open_connection(*where, limit=_LINE_LIMIT)
    import ssl  # only https needs it

    context = ssl.create_default_context()
    if proxy is None:
        return await asyncio.open_connection(host, port, ssl=context, server_hostname=host.strip("[]"),
                                             limit=_LINE_LIMIT)
    tunnel = await _tunnel(proxy, f"{host}:{port}" if ":" not in host else f"[{host}]:{port}")
    try:
        return await asyncio.open_connection(sock=tunnel, ssl=context, server_hostname=host,
                                             limit=_LINE_LIMIT)
    except BaseException:
        tunnel.close()
        raise


async def _tunnel(proxy: tuple[str, int, str], destination: str) -> socket.socket:
    """A connection through the proxy to `destination` (CONNECT), ready for TLS to start on it."""
    loop = asyncio.get_running_loop()
    failure: OSError | None = None
    for family, kind, protocol, _, address in await loop.getaddrinfo(proxy[0], proxy[1],
                                                                      type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, protocol)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            break
        except OSError as exc:
            sock.close()
            failure = exc
        except BaseException:
            sock.close()
            raise
    else:
        raise failure or OSError(f"the proxy {proxy[0]} has no address")
    try:
        auth = f"Proxy-Authorization: {proxy[2]}\r\n" if proxy[2] else ""
        await loop.sock_sendall(sock, f"CONNECT {destination} HTTP/1.1\r\nHost: {destination}\r\n{auth}\r\n"
                                .encode("ascii"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await loop.sock_recv(sock, 4096)
            if not chunk or len(head) > _HEAD_LIMIT:
                raise OSError("the proxy closed the connection or sent no usable reply to CONNECT")
            head += chunk
        status_line = head.partition(b"\r\n")[0]
        match = _STATUS_LINE.fullmatch(status_line.decode("latin-1"))
        if match is None or not match.group(1).startswith("2"):
            raise OSError(f"the proxy refused the tunnel: {status_line.decode('latin-1')[:200]!r}")
        if head.index(b"\r\n\r\n") + 4 != len(head):
            raise OSError("the proxy sent data before the tunnel was open")
        return sock
    except BaseException:
        sock.close()
        raise


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    line = await reader.readline()
    if not line:
        raise EOFError("the server closed the connection without a reply")
    match = _STATUS_LINE.fullmatch(line.decode("latin-1").rstrip("\r\n"))
    if match is None:
        raise ValueError(f"the reply is not HTTP/1.x: {line[:80].decode('latin-1')!r}")
    headers: dict[str, str] = {}
    size = len(line)
    while True:
        line = await reader.readline()
        size += len(line)
        if not line:
            raise EOFError("the reply's headers were cut off")
        if line in (b"\r\n", b"\n"):
            return int(match.group(1)), headers
        if size > _HEAD_LIMIT or len(headers) >= _MAX_HEADERS:
            raise ValueError("the reply's headers are too large")
        name, sep, value = line.decode("latin-1").partition(":")
        if sep and name.strip():
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], max_bytes: int) -> bytes:
    """The body, as far as max_bytes + 1 bytes (one more than is kept, to tell a body that was cut)."""
    wanted = max_bytes + 1
    data = bytearray()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while len(data) < wanted:
            size_line = await reader.readline()
            if not size_line:
                raise EOFError("the chunked body was cut off")
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                break
            left = size
            while left > 0 and len(data) < wanted:
                chunk = await reader.read(min(left, _READ_CHUNK, wanted - len(data)))
                if not chunk:
                    raise EOFError("the chunked body was cut off")
                data += chunk
                left -= len(chunk)
            if left == 0:
                await reader.readexactly(2)  # the CRLF after each chunk
        return bytes(data)
    length_text = headers.get("content-length")
    length = int(length_text.split(",")[0]) if length_text else None
    limit = wanted if length is None else min(length, wanted)
    while len(data) < limit:
        chunk = await reader.read(min(_READ_CHUNK, limit - len(data)))
        if not chunk:
            break  # the server closed the connection: the body is what came
        data += chunk
    return bytes(data)
