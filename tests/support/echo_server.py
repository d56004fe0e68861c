"""A local HTTP server on 127.0.0.1 that echoes each request back: for std.http_get's headers and secrets.

`GET /echo...` answers 200 with a JSON body of the request's path (query included) and headers; `/to/HOST`
redirects to `http://HOST:PORT/echo` (another origin for `localhost`); `/broken` closes the connection
without a reply. Every request is recorded in `requests`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class EchoServer:
    url: str
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def echo_server() -> Iterator[EchoServer]:
    handle: EchoServer | None = None

    class Echo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            assert handle is not None
            seen = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
            handle.requests.append(seen)
            if self.path.startswith("/broken"):
                self.close_connection = True
                self.connection.close()
                return
            if self.path.startswith("/to/"):
                host = self.path.split("/")[2].split("?")[0]
                self.send_response(302)
                self.send_header("Location", f"http://{host}:{handle.port}/echo")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps(seen, sort_keys=True).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    port = httpd.server_address[1]
    handle = EchoServer(f"http://127.0.0.1:{port}", port)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield handle
    finally:
        httpd.shutdown()
        httpd.server_close()
