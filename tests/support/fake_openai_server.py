"""A local OpenAI-compatible chat server that replays scripted replies and faults over real HTTP.

Tests point litellm at it (model "openai/<name>", api_base=server.url + "/v1") so the whole HTTP path —
the OpenAI SDK, litellm's exception mapping, our retries and timeouts — runs for real, without a network.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typing_extensions import Self


@dataclass
class Reply:
    """A 200 answer: plain text, a JSON value (sent as the message content) or tool calls."""

    text: str | None = None
    json: Any = None
    tool_calls: list[dict[str, Any]] | None = None  # [{"name": ..., "arguments": {...} or "raw text"}]
    prompt_tokens: int = 11
    completion_tokens: int = 7


@dataclass
class Fail:
    """An HTTP error status with an OpenAI-style error body."""

    status: int
    message: str = "scripted failure"
    retry_after: float | None = None


@dataclass
class Slow:
    """Wait `seconds`, then answer with `then`; longer than the client's timeout, the client gives up."""

    seconds: float
    then: Reply | Fail = field(default_factory=lambda: Reply(text="too late"))


@dataclass
class Malformed:
    """A 200 whose body is not JSON."""

    body: str = '{"id": "chatcmpl-broken", "choices": [ {"message": '


@dataclass
class Truncated:
    """Headers promise more bytes than are sent, then the connection closes."""

    body: str = '{"id": "chatcmpl-cut", "object": "chat.com'


@dataclass
class Trickle:
    """A 200 whose body arrives one byte at a time, `seconds_per_byte` apart: no read ever times out."""

    seconds_per_byte: float = 0.5
    body: str = '{"id": "chatcmpl-slow", "object": "chat.completion", "choices": []}' + " " * 400


@dataclass
class NoChoices:
    """A 200 with a well-formed body whose "choices" list is empty."""


@dataclass
class Gzipped:
    """A 200 whose gzip-compressed body inflates to `inflated_bytes` of JSON whitespace and a reply."""

    inflated_bytes: int = 50_000_000


@dataclass
class Chunked:
    """A 200 whose body comes in chunks (Transfer-Encoding: chunked) of `size` bytes."""

    reply: Reply = field(default_factory=lambda: Reply(text="chunked"))
    size: int = 7


@dataclass
class Raw:
    """Exactly these bytes on the connection, which is then closed (a reply that is not HTTP, a cut head)."""

    data: bytes = b"NOT HTTP AT ALL\r\n\r\n"


@dataclass
class ThenClose:
    """Answer with `reply`, promising to keep the connection open, then close it without a word: the next
    request a client sends on it finds it closed (a server's idle timeout, racing the client)."""

    reply: Reply = field(default_factory=lambda: Reply(text="and then the door shut"))


Behaviour = Reply | Fail | Slow | Malformed | Truncated | Trickle | NoChoices | Gzipped | Chunked | Raw | ThenClose


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes
    at: float = field(default_factory=time.monotonic)  # when it arrived
    peer: tuple[str, int] = ("", 0)  # the client's address: one per connection

    @property
    def connection(self) -> int:
        """The client's port: requests on one connection share it."""
        return self.peer[1]

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")


class _QuietHTTPServer(ThreadingHTTPServer):
    """A client that stops reading (at a reply cap, at its deadline) resets the connection: not worth a
    traceback in the test's output."""

    closed_connections = 0  # how many connections the server has shut, counted once each is shut

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed_connections += 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    """Serves POST /v1/chat/completions (and /chat/completions) from queues of behaviours.

    `enqueue(b)` adds to the shared queue; `enqueue(b, model="x")` to a queue only requests for model "x"
    draw from (they fall back to the shared queue when their own is empty). With nothing queued the
    server answers with `default` when one is given, else 500 "fake server: nothing queued" so a test that
    under-scripts fails loudly.
    """

    def __init__(self, default: Behaviour | None = None) -> None:
        self.default = default
        self._queues: dict[str | None, deque[Behaviour]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests it was answering at once
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):  # typeshed allows bytes for a socket address; an IPv4 server gives str
            host = host.decode("ascii")
        return f"http://{host}:{port}"

    def enqueue(self, *behaviours: Behaviour, model: str | None = None) -> None:
        with self._lock:
            self._queues.setdefault(model, deque()).extend(behaviours)

    def wait_closed(self, count: int, timeout: float = 5.0) -> None:
        """Wait until the server has shut `count` connections in all (a client may then see each one shut)."""
        deadline = time.monotonic() + timeout
        while self._httpd.closed_connections < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server shut {self._httpd.closed_connections} connections, not {count}")
            time.sleep(0.002)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.model == model]

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a Slow behaviour
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _next_behaviour(self, model: str | None) -> Behaviour | None:
        with self._lock:
            for key in (model, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        return self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class ChatCompletionsHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                # header names as the server reads them: in any case (the record is keyed in lower case)
                headers = {name.lower(): value for name, value in self.headers.items()}
                server.requests.append(RecordedRequest(self.path, headers, body, raw,
                                                       peer=tuple(self.client_address[:2])))
                # any prefix before /v1 (e.g. /worker-a/v1): tests tell their clients apart by it
                if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
                    self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                model = body.get("model") if isinstance(body, dict) else None
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._perform(server._next_behaviour(model), model or "unknown")
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _perform(self, behaviour: Behaviour | None, model: str) -> None:
                if behaviour is None:
                    error = {"message": "fake server: nothing queued", "type": "server"}
                    self._send_json(500, {"error": error})
                elif isinstance(behaviour, Slow):
                    if server._closing.wait(behaviour.seconds):
                        return
                    self._perform(behaviour.then, model)
                elif isinstance(behaviour, Fail):
                    headers = {}
                    if behaviour.retry_after is not None:
                        headers["Retry-After"] = f"{behaviour.retry_after:g}"
                    error = {"message": behaviour.message, "type": "scripted", "code": str(behaviour.status)}
                    self._send_json(behaviour.status, {"error": error}, headers)
                elif isinstance(behaviour, Malformed):
                    self._send_raw(200, behaviour.body.encode())
                elif isinstance(behaviour, Trickle):
                    data = behaviour.body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    for index in range(len(data)):
                        if server._closing.wait(behaviour.seconds_per_byte):
                            return
                        try:
                            self.wfile.write(data[index:index + 1])
                            self.wfile.flush()
                        except OSError:  # the client gave up, as it should
                            return
                elif isinstance(behaviour, Chunked):
                    data = json.dumps(completion_body(behaviour.reply, model)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for start in range(0, len(data), behaviour.size):
                        piece = data[start:start + behaviour.size]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")
                elif isinstance(behaviour, Raw):
                    self.wfile.write(behaviour.data)
                    self.wfile.flush()
                    self.close_connection = True
                elif isinstance(behaviour, ThenClose):
                    self._send_json(200, completion_body(behaviour.reply, model))
                    self.close_connection = True
                elif isinstance(behaviour, NoChoices):
                    body = completion_body(Reply(text="x"), model)
                    body["choices"] = []
                    self._send_json(200, body)
                elif isinstance(behaviour, Gzipped):
                    data = gzip_bomb(completion_body(Reply(text="huge"), model), behaviour.inflated_bytes)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Encoding", "gzip")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    try:
                        self.wfile.write(data)
                    except OSError:
                        return
                elif isinstance(behaviour, Truncated):
                    data = behaviour.body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data) + 200))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    self.close_connection = True
                else:
                    self._send_json(200, completion_body(behaviour, model))

            def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers)

            def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return ChatCompletionsHandler


def gzip_bomb(body: dict[str, Any], inflated_bytes: int) -> bytes:
    """`body` as gzip-compressed JSON padded with `inflated_bytes` of spaces, compressed a megabyte at a
    time so the server never holds the inflated text itself."""
    import zlib

    text = json.dumps(body).encode()
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    parts = [packer.compress(text[:-1])]
    block = b" " * (1 << 20)
    left = inflated_bytes
    while left > 0:
        parts.append(packer.compress(block[:min(left, len(block))]))
        left -= len(block)
    parts.append(packer.compress(b"}"))
    parts.append(packer.flush())
    return b"".join(parts)


def completion_body(reply: Reply, model: str) -> dict[str, Any]:
    """The OpenAI chat.completion object for a Reply."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish_reason = "stop"
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"] if isinstance(call["arguments"], str)
                    else json.dumps(call["arguments"]),
                },
            }
            for index, call in enumerate(reply.tool_calls)
        ]
        finish_reason = "tool_calls"
    elif reply.json is not None:
        message["content"] = json.dumps(reply.json)
    else:
        message["content"] = reply.text if reply.text is not None else ""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }
