"""The tool registry: which tools a machine has, their function schemas, argument checking, user tools by
import path, and std.http_get's allow list."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from statewright.runtime.spec import ToolSpec
from statewright.runtime.tool_signatures import STD_TOOLS
from statewright.runtime.tools import ToolError, ToolRegistry

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.fixture
def workspace(tmp_path: Path) -> str:
    return str(tmp_path / "workspace")


# ---- which tools a machine has -------------------------------------------------------------------------


def test_std_tools_on_by_default_are_there_without_a_declaration(workspace: str) -> None:
    tools = ToolRegistry({}, workspace)
    assert tools.names() == ["std.python", "std.read_file", "std.write_file", "std.list_files"]
    assert Path(workspace).is_dir()


@pytest.mark.parametrize("name", ["std.shell", "std.http_get"])
def test_shell_and_http_get_are_off_unless_declared(workspace: str, name: str) -> None:
    tools = ToolRegistry({}, workspace)
    assert name not in tools.names()
    with pytest.raises(ToolError, match=f"{re.escape(name)} is off for this machine: it must declare "
                                        f"`tool {re.escape(name)}`"):
        tools.call(name, {})
    declared = ToolRegistry({name: ToolSpec(name)}, workspace)
    assert name in declared.names()


def test_declared_shell_runs_commands(workspace: str, jail: None) -> None:
    tools = ToolRegistry({"std.shell": ToolSpec("std.shell")}, workspace)
    result = tools.call("std.shell", {"command": "echo hello; pwd"})
    assert result == {"exit_code": 0, "stdout": f"hello\n{Path(workspace).resolve()}\n", "stderr": "",
                      "timed_out": False}


def test_an_unknown_tool_is_refused_with_a_suggestion(workspace: str) -> None:
    tools = ToolRegistry({}, workspace)
    with pytest.raises(ToolError, match=r"no tool named 'std_pyton'.*Did you mean std_python\?"):
        tools.call("std_pyton", {"code": "print(1)"})


# ---- function schemas ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STD_TOOLS))
def test_every_std_tool_has_an_openai_function_schema(workspace: str, name: str) -> None:
    tools = ToolRegistry({name: ToolSpec(name)}, workspace)
    schema = tools.schema(name)
    function = schema["function"]
    assert schema["type"] == "function"
    assert FUNCTION_NAME.match(function["name"]) and function["name"] == name.replace(".", "_")
    assert function["description"] == STD_TOOLS[name]["doc"]
    parameters = function["parameters"]
    assert parameters["type"] == "object" and parameters["additionalProperties"] is False
    assert set(parameters["properties"]) == set(STD_TOOLS[name]["params"])
    required = {param for param, (_, needed) in STD_TOOLS[name]["params"].items() if needed}
    assert set(parameters.get("required", [])) == required
    for prop in parameters["properties"].values():
        assert prop["description"] and "title" not in prop and "default" not in prop


def test_std_python_schema_in_full(workspace: str) -> None:
    schema = ToolRegistry({}, workspace).schema("std.python")
    assert schema["function"]["parameters"]["properties"] == {
        "code": {"type": "string", "description": STD_TOOLS["std.python"]["param_docs"]["code"]},
        "timeout": {"type": "number", "description": STD_TOOLS["std.python"]["param_docs"]["timeout"]},
    }


def test_function_names_map_back_to_tool_names(workspace: str) -> None:
    tools = ToolRegistry({}, workspace)
    assert tools.function_name("std.read_file") == "std_read_file"
    assert tools.tool_name("std_read_file") == "std.read_file"
    tools.call("std_write_file", {"path": "a.txt", "content": "same tool"})
    assert tools.call("std.read_file", {"path": "a.txt"}) == "same tool"


# ---- argument checking ------------------------------------------------------------------------------------


def test_bad_arguments_to_a_std_tool_list_every_problem_and_the_right_call(workspace: str) -> None:
    tools = ToolRegistry({}, workspace)
    with pytest.raises(ToolError) as caught:
        tools.call("std_write_file", {"pth": "a.txt", "content": 3})
    message = str(caught.value)
    assert message.startswith("std.write_file: bad arguments:")
    assert "- path: missing required argument" in message
    assert "- content: Input should be a valid string" in message
    assert "- pth: unexpected argument (did you mean 'path'?)" in message
    assert message.endswith("Call it as std_write_file(path: str, content: str).")


def test_arguments_may_come_as_the_json_text_a_model_sent(workspace: str, jail: None) -> None:
    tools = ToolRegistry({}, workspace)
    assert tools.call("std.python", '{"code": "print(6 * 7)", "timeout": null}')["stdout"] == "42\n"
    with pytest.raises(ToolError, match="the arguments are not valid JSON"):
        tools.call("std.python", '{"code": ')
    with pytest.raises(ToolError, match="must be a JSON object, not list"):
        tools.call("std.python", "[1, 2]")
    # no arguments at all is JSON's whitespace alone; a separator or a Unicode space is text that is not JSON
    with pytest.raises(ToolError, match="missing required argument"):
        tools.call("std.python", " \t\r\n")
    for odd in ("\x1c", "\x0b", "\u2028", "\xa0"):
        with pytest.raises(ToolError, match="the arguments are not valid JSON"):
            tools.call("std.python", odd)


def test_a_nonpositive_timeout_is_refused(workspace: str) -> None:
    with pytest.raises(ToolError, match="timeout must be a positive number of seconds"):
        ToolRegistry({}, workspace).call("std.python", {"code": "pass", "timeout": 0})


# ---- user tools by import path -----------------------------------------------------------------------


USER_TOOLS = '''
from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel

IMPORTED = True


class Hit(BaseModel):
    term: str
    score: float


def lookup(query: str, limit: int = 3, mode: Literal["fast", "exact"] = "fast") -> list[str]:
    """Find glossary entries for a term.

    Searches every glossary the project knows about.

    Args:
        query: The term to look up,
            one or more words.
        limit (int): Most entries to return.
    """
    return [f"{query}-{index}-{mode}" for index in range(limit)]


def explode(amount: int) -> int:
    """Always fails."""
    raise ValueError(f"cannot explode {amount} times")


def opaque() -> object:
    return object()


def best_hit(term: str) -> Hit:
    return Hit(term=term, score=0.5)


def nan_hit() -> Hit:
    return Hit(term="x", score=float("nan"))


def mean_of(values: list[float]) -> dict:
    return {"mean": sum(values) / len(values) if values else float("nan"), "spread": [float("inf")] * len(values)}


def first(text, /, count: int = 1):
    return text[:count]


async def slow_echo(text: str) -> str:
    """Echo after a pause."""
    await asyncio.sleep(0)
    return text
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"sw_user_tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / f"{name}.py").write_text(textwrap.dedent(USER_TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    yield name
    sys.modules.pop(name, None)


def user_tools(workspace: str, module: str, *functions: str) -> ToolRegistry:
    return ToolRegistry({f: ToolSpec(f, import_path=f"{module}:{f}") for f in functions}, workspace)


def test_user_tools_are_imported_on_first_use(workspace: str, user_module: str) -> None:
    tools = user_tools(workspace, user_module, "lookup")
    assert "lookup" in tools.names()
    assert user_module not in sys.modules
    tools.schema("lookup")
    assert sys.modules[user_module].IMPORTED


def test_user_tool_schema_comes_from_signature_and_docstring(workspace: str, user_module: str) -> None:
    schema = user_tools(workspace, user_module, "lookup").schema("lookup")
    assert schema == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find glossary entries for a term.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The term to look up, one or more words."},
                    "limit": {"type": "integer", "default": 3, "description": "Most entries to return."},
                    "mode": {"type": "string", "enum": ["fast", "exact"], "default": "fast"},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }


def test_user_tool_arguments_are_validated_and_defaults_applied(workspace: str, user_module: str) -> None:
    tools = user_tools(workspace, user_module, "lookup", "first")
    assert tools.call("lookup", {"query": "fsm", "limit": "2"}) == ["fsm-0-fast", "fsm-1-fast"]
    assert tools.call("first", {"text": "abc", "count": 2}) == "ab"  # positional-only parameters work too


def test_bad_arguments_to_a_user_tool_list_the_problems(workspace: str, user_module: str) -> None:
    tools = user_tools(workspace, user_module, "lookup")
    with pytest.raises(ToolError) as caught:
        tools.call("lookup", {"limit": "many", "mode": "slow", "qeury": "fsm"})
    message = str(caught.value)
    assert "- query: missing required argument" in message
    assert "- limit: Input should be a valid integer" in message
    assert "- mode: Input should be 'fast' or 'exact'" in message
    assert "- qeury: unexpected argument (did you mean 'query'?)" in message
    assert "Call it as lookup(query: str, limit: int = 3, mode: Literal['fast', 'exact'] = 'fast')." in message


def test_an_exception_in_a_user_tool_becomes_a_tool_error_without_traceback(
    workspace: str, user_module: str
) -> None:
    with pytest.raises(ToolError) as caught:
        user_tools(workspace, user_module, "explode").call("explode", {"amount": 2})
    assert str(caught.value) == "tool 'explode' raised ValueError: cannot explode 2 times"
    assert caught.value.tool == "explode"


def test_results_must_be_json_serialisable(workspace: str, user_module: str) -> None:
    tools = user_tools(workspace, user_module, "opaque", "best_hit")
    with pytest.raises(ToolError, match="returned a value of type 'object', which is not JSON-serialisable"):
        tools.call("opaque", {})
    assert tools.call("best_hit", {"term": "fsm"}) == {"term": "fsm", "score": 0.5}


def test_a_result_holding_nan_or_infinity_is_a_tool_error(workspace: str, user_module: str) -> None:
    """JSON has no NaN or Infinity: a result holding one would reach the model, the trace and the
    checkpoint as Python's `NaN` token, which no JSON reader takes. The tool's call fails with why, as a
    result that is not JSON does."""
    tools = user_tools(workspace, user_module, "mean_of", "nan_hit")
    for values, shown in (([], "NaN"), ([1.0], "Infinity")):
        with pytest.raises(ToolError) as caught:
            tools.call("mean_of", {"values": values})
        assert str(caught.value) == (f"the result of tool 'mean_of' holds {shown}, which JSON cannot carry (JSON "
                                     "has no NaN or Infinity): return a number, or None")
    with pytest.raises(ToolError, match="the result of tool 'nan_hit' holds NaN"):  # in a typed result too
        tools.call("nan_hit", {})


def test_async_user_tools_work_from_sync_and_async_code(workspace: str, user_module: str, jail: None) -> None:
    tools = user_tools(workspace, user_module, "slow_echo")
    assert tools.call("slow_echo", {"text": "sync"}) == "sync"
    assert asyncio.run(tools.acall("slow_echo", {"text": "async"})) == "async"
    assert asyncio.run(tools.acall("std.python", {"code": "print('threaded')"}))["stdout"] == "threaded\n"


def test_a_user_tool_that_cannot_be_imported_fails_clearly_on_use(workspace: str) -> None:
    tools = ToolRegistry({"fetch": ToolSpec("fetch", import_path="no_such_package.tools:fetch"),
                          "bare": ToolSpec("bare", import_path="os.path")}, workspace)
    assert tools.names()[-2:] == ["fetch", "bare"]  # construction never imports
    with pytest.raises(ToolError, match=r"tool 'fetch': cannot import module 'no_such_package.tools' "
                                        r"\(ModuleNotFoundError: .*is it installed or on PYTHONPATH\?"):
        tools.schema("fetch")
    with pytest.raises(ToolError, match="must look like 'package.module:function'"):
        tools.call("bare", {})


def test_a_missing_function_in_the_module_is_named(workspace: str, user_module: str) -> None:
    tools = user_tools(workspace, user_module, "absent")
    with pytest.raises(ToolError, match=f"module '{user_module}' has no attribute 'absent'"):
        tools.call("absent", {})


# ---- std.http_get ------------------------------------------------------------------------------------------


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/hello":
            self._send(200, b"hello from the test server")
        elif self.path == "/big":
            self._send(200, b"z" * 5000)
        elif self.path == "/hop":
            self._redirect("/hello")
        elif self.path == "/away":
            self._redirect("http://not-allowed.invalid/steal")
        else:
            self._send(404, b"no such page")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address a socket of this process connects to (asyncio's included); anything but 127.0.0.1
    fails the test instead of leaving the host."""
    made: list[tuple[str, int]] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: tuple[str, int]) -> None:
        made.append(address)
        assert address[0] == "127.0.0.1", f"std.http_get connected to {address}"
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    return made


def http_tools(workspace: str, **options: object) -> ToolRegistry:
    return ToolRegistry({"std.http_get": ToolSpec("std.http_get", options=options)}, workspace)


def test_http_get_fetches_from_an_allowed_host(workspace: str, server: str, connections: list) -> None:
    tools = http_tools(workspace, allow=["127.0.0.1"])
    assert tools.call("std.http_get", {"url": f"{server}/hello"}) == {
        "status": 200, "body": "hello from the test server"}
    assert tools.call("std_http_get", {"url": f"{server}/nothing"}) == {"status": 404, "body": "no such page"}


def test_http_get_refuses_other_hosts_before_connecting(workspace: str, connections: list) -> None:
    tools = http_tools(workspace, allow=["127.0.0.1", "*.example.org"])
    with pytest.raises(ToolError, match=r"host 'example.com' is not allowed; allowed hosts: '127.0.0.1', "
                                        r"'\*.example.org'"):
        tools.call("std.http_get", {"url": "https://example.com/"})
    with pytest.raises(ToolError, match="host 'example.org.evil.net' is not allowed"):
        tools.call("std.http_get", {"url": "http://example.org.evil.net/"})
    with pytest.raises(ToolError, match="host 'evil.net' is not allowed"):
        tools.call("std.http_get", {"url": "http://127.0.0.1@evil.net/"})
    assert connections == []


def test_http_get_with_no_allow_list_reaches_nothing(workspace: str, connections: list) -> None:
    with pytest.raises(ToolError, match="allowed hosts: none"):
        http_tools(workspace).call("std.http_get", {"url": "http://127.0.0.1/"})
    assert connections == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "127.0.0.1/hello"])
def test_http_get_refuses_other_schemes(workspace: str, connections: list, url: str) -> None:
    with pytest.raises(ToolError, match="is not an http:// or https:// URL"):
        http_tools(workspace, allow=["127.0.0.1"]).call("std.http_get", {"url": url})
    assert connections == []


def test_http_get_follows_redirects_only_to_allowed_hosts(workspace: str, server: str,
                                                          connections: list) -> None:
    tools = http_tools(workspace, allow=["127.0.0.1"])
    assert tools.call("std.http_get", {"url": f"{server}/hop"})["body"] == "hello from the test server"
    with pytest.raises(ToolError, match=r"refused a redirect to 'http://not-allowed.invalid/steal'"):
        tools.call("std.http_get", {"url": f"{server}/away"})
    assert {host for host, _ in connections} == {"127.0.0.1"}


def test_http_get_caps_the_body(workspace: str, server: str, connections: list) -> None:
    result = http_tools(workspace, allow=["127.0.0.1"], max_bytes=100).call("std.http_get",
                                                                           {"url": f"{server}/big"})
    assert result["body"] == "z" * 100 + "\n[body truncated at 100 bytes]"


# ---- std.http_get: one deadline, and the HTTP it speaks ---------------------------------------------------


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket, bytes], None]], int]]:
    """Start TCP servers on 127.0.0.1 that answer each connection with a function of (socket, request head)."""
    servers: list[socket.socket] = []
    stop = threading.Event()

    def start(answer: Callable[[socket.socket, bytes], None]) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.1)
        servers.append(listener)

        def handle(connection: socket.socket) -> None:
            with connection:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                try:
                    answer(connection, head)
                except OSError:
                    pass  # the client hung up: what the test wanted to see

        def serve() -> None:
            while not stop.is_set():
                try:
                    connection, _ = listener.accept()
                except OSError:
                    continue
                threading.Thread(target=handle, args=(connection,), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        return int(listener.getsockname()[1])

    yield start
    stop.set()
    for listener in servers:
        listener.close()


def trickle(data: bytes, pause: float) -> Callable[[socket.socket, bytes], None]:
    def answer(connection: socket.socket, head: bytes) -> None:
        for index in range(len(data)):
            connection.sendall(data[index:index + 1])
            time.sleep(pause)
    return answer


def timed_get(tools: ToolRegistry, url: str) -> tuple[float, Any]:
    began = time.monotonic()
    try:
        outcome: Any = tools.call("std.http_get", {"url": url})
    except ToolError as exc:
        outcome = exc
    return time.monotonic() - began, outcome


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000,  # a body sent a byte at a time
    b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 100000,  # headers that never end
    b"",  # a server that accepts and never answers
])
def test_http_get_ends_at_its_timeout_however_slowly_the_server_answers(workspace: str, raw_server: Any,
                                                                        connections: list, reply: bytes) -> None:
    port = raw_server(trickle(reply, 0.05) if reply else (lambda connection, head: time.sleep(30)))
    tools = http_tools(workspace, allow=["127.0.0.1"], timeout=1)
    took, outcome = timed_get(tools, f"http://127.0.0.1:{port}/slow")
    assert isinstance(outcome, ToolError)
    assert str(outcome) == (f"std.http_get: 'http://127.0.0.1:{port}/slow' did not answer in full within 1 "
                            "seconds (the tool's timeout option, for the whole request); nothing was kept")
    assert took < 2.5


def test_http_get_reads_chunked_bodies_and_caps_them(workspace: str, raw_server: Any, connections: list) -> None:
    chunks = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n"
    port = raw_server(lambda connection, head: connection.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain; charset=latin-1\r\n\r\n"
        + chunks))
    url = f"http://127.0.0.1:{port}/"
    assert http_tools(workspace, allow=["127.0.0.1"]).call("std.http_get", {"url": url}) == {
        "status": 200, "body": "hello, world"}
    assert http_tools(workspace, allow=["127.0.0.1"], max_bytes=7).call("std.http_get", {"url": url}) == {
        "status": 200, "body": "hello, \n[body truncated at 7 bytes]"}


def test_http_get_reads_a_body_that_ends_with_the_connection(workspace: str, raw_server: Any,
                                                             connections: list) -> None:
    port = raw_server(lambda connection, head: connection.sendall(b"HTTP/1.0 500 Oops\r\n\r\nsorry"))
    assert http_tools(workspace, allow=["127.0.0.1"]).call("std.http_get", {"url": f"http://127.0.0.1:{port}/"}) == {
        "status": 500, "body": "sorry"}


def test_http_get_escapes_what_could_split_the_request(workspace: str, raw_server: Any, connections: list) -> None:
    heads: list[bytes] = []

    def answer(connection: socket.socket, head: bytes) -> None:
        heads.append(head)
        connection.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    port = raw_server(answer)
    url = f"http://127.0.0.1:{port}/a b?q=1 HTTP/1.1\r\nX-Injected: yes&r=\u00e9"
    assert http_tools(workspace, allow=["127.0.0.1"]).call("std.http_get", {"url": url})["status"] == 204
    [head] = heads
    request_line, *headers = head.decode("latin-1").split("\r\n")
    assert request_line == "GET /a%20b?q=1%20HTTP/1.1X-Injected:%20yes&r=%C3%A9 HTTP/1.1"
    assert not any(line.lower().startswith("x-injected") for line in headers)


def test_http_get_stops_a_redirect_loop(workspace: str, raw_server: Any, connections: list) -> None:
    port = raw_server(lambda connection, head: connection.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"))
    with pytest.raises(ToolError, match="redirected more than 10 times"):
        http_tools(workspace, allow=["127.0.0.1"]).call("std.http_get", {"url": f"http://127.0.0.1:{port}/"})


def test_http_get_goes_through_the_environments_proxy_with_the_allow_list_still_checked(
        workspace: str, raw_server: Any, connections: list, monkeypatch: pytest.MonkeyPatch) -> None:
    heads: list[bytes] = []

    def proxy(connection: socket.socket, head: bytes) -> None:
        heads.append(head)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfrom proxy")

    port = raw_server(proxy)
    monkeypatch.setenv("http_proxy", f"http://user:pass@127.0.0.1:{port}")
    tools = http_tools(workspace, allow=["docs.example.org"])
    assert tools.call("std.http_get", {"url": "http://docs.example.org/page"})["body"] == "from proxy"
    assert heads[0].startswith(b"GET http://docs.example.org/page HTTP/1.1\r\n")
    assert b"\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n" in heads[0]
    with pytest.raises(ToolError, match="host 'other.example.org' is not allowed"):
        tools.call("std.http_get", {"url": "http://other.example.org/"})
    assert len(heads) == 1


@pytest.fixture
def tls_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 that the default TLS context trusts (SSL_CERT_FILE)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no test certificate can be made")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return str(cert), str(key)


def test_http_get_speaks_https_directly_and_through_a_connect_tunnel(
        workspace: str, raw_server: Any, connections: list, tls_certificate: tuple[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_certificate)
    listener = socket.create_server(("127.0.0.1", 0))
    tls_port = listener.getsockname()[1]

    def serve_tls() -> None:
        for _ in range(2):
            connection, _ = listener.accept()
            with context.wrap_socket(connection, server_side=True) as tls:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += tls.recv(4096)
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")

    threading.Thread(target=serve_tls, daemon=True).start()
    tools = http_tools(workspace, allow=["127.0.0.1"])
    assert tools.call("std.http_get", {"url": f"https://127.0.0.1:{tls_port}/"})["body"] == "secret"

    tunnels: list[bytes] = []

    def tunnel(connection: socket.socket, head: bytes) -> None:
        tunnels.append(head)
        upstream = socket.create_connection(("127.0.0.1", tls_port))
        connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for source, sink in ((connection, upstream), (upstream, connection)):
            threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()
        time.sleep(2)

    monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{raw_server(tunnel)}")
    assert tools.call("std.http_get", {"url": f"https://127.0.0.1:{tls_port}/"})["body"] == "secret"
    assert tunnels[0].startswith(f"CONNECT 127.0.0.1:{tls_port} HTTP/1.1\r\n".encode())
    listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass


def test_the_jail_options_are_checked_by_the_compiler(tmp_path: Path) -> None:
    from statewright import api

    spec = tmp_path / "jail.fsm"
    spec.write_text('machine demo {\n    tool std.python {\n        network true\n        tmp_mb 256\n    }\n'
                    '    tool std.shell { network false }\n'
                    '    start state run {\n        call std.python(code = "print(1)")\n        -> done\n    }\n'
                    '    final state done\n}\n')
    assert api.check_file(spec).ok
    spec.write_text(spec.read_text().replace("tmp_mb 256", "tmp_mb 1.5"))
    assert [d.code for d in api.check_file(spec).diagnostics if d.severity == "error"] == ["SW4006"]
