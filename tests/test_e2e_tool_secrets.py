"""Tool secrets end to end: a secret named in the spec reaches the service and no sink.

A generated runner (a subprocess, as users run it), `statewright run` and the Python API fetch from a local
server on 127.0.0.1 that echoes every header and query back; the secret's value must be in the request and
nowhere else: not on stdout (the result JSON), stderr (progress), the trace, the checkpoint database, the
model's messages, tool results or errors. The secret's name is one the environment-based redaction of
traces does not know (no KEY, TOKEN, SECRET or PASSWORD in it), and its value has no key shape, so only the
declared-secret redaction can hide it.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, files_containing, read_events, runner_process
from support.echo_server import EchoServer, echo_server

import statewright
from statewright.runtime.scripted import Script, ScriptedClient
from statewright.runtime.spec import ToolSpec
from statewright.runtime.tools import ToolError, ToolRegistry

NAME = "SEARCH_CREDENTIAL"

SPEC = textwrap.dedent(f"""\
    # keyed_search.fsm — fetch with a secret header and query parameter, then have an agent read the page
    machine keyed_search {{
        input url: str

        tool std.http_get {{
            allow ["127.0.0.1", "localhost"]
            secrets [{NAME}]
            headers {{
                "X-Search-Credential" "${{{NAME}}}"
                "X-Client" "statewright"
            }}
            query {{
                credential "${{{NAME}}}"
            }}
        }}

        agent reader {{
            prompt "You read search results."
            tools [std.http_get]
        }}

        start state fetch {{
            call std.http_get(url = url)
            when output.status == 200 -> read
            otherwise -> failed
        }}

        state read {{
            agent reader
            do "Summarize this page: {{{{ fetch.output.body }}}}"
            -> done
        }}

        final state done {{
            result "{{{{ fetch.output.body }}}}"
        }}

        final state failed

        test "a page is read" {{
            input {{
                url "http://127.0.0.1/echo"
            }}
            reply fetch {{
                status 200
                body "a page"
            }}
            reply read "A summary."
            expect path [fetch, read, done]
            expect result "a page"
        }}
    }}
""")


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"cred-{uuid.uuid4().hex}"
    monkeypatch.setenv(NAME, value)
    for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    return value


@pytest.fixture
def server() -> Iterator[EchoServer]:
    with echo_server() as running:
        yield running


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "keyed_search.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agent": {"read": ["A summary."]}}), encoding="utf-8")
    return path


def test_the_secret_reaches_the_server_and_no_sink_of_a_generated_runner(
        tmp_path: Path, spec: Path, script: Path, secret: str, server: EchoServer) -> None:
    runner = compile_runner(spec, tmp_path / "keyed_search_runner.py")
    assert secret.encode() not in runner.read_bytes() and NAME.encode() in runner.read_bytes()
    done = runner_process(sys.executable, runner, "--input", f"url={server.url}/echo?q=fsm", "--script",
                          str(script), "--trace", str(tmp_path / "trace.jsonl"), "--trace-content",
                          "--checkpoint", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    # the request carried the secret, in its header and its query, and the other header as written
    [request] = server.requests
    assert request["headers"]["x-search-credential"] == secret
    assert request["headers"]["x-client"] == "statewright"
    assert request["path"] == f"/echo?q=fsm&credential={secret}"

    # ... the server echoed it back, and every sink shows it redacted
    result = json.loads(done.stdout)
    echoed = json.loads(result["result"])
    assert echoed["headers"]["x-search-credential"] == "[REDACTED]"
    assert echoed["path"] == "/echo?q=fsm&credential=[REDACTED]"
    assert secret not in done.stdout and secret not in done.stderr
    assert "fetch" in done.stderr  # the progress lines were written (and hold no secret)
    events = read_events(tmp_path / "trace.jsonl")
    reader_call = next(e for e in events if e["event"] == "llm_call" and e["state"] == "read")
    assert "[REDACTED]" in reader_call["messages"][-1]["content"]  # what the model was sent
    assert files_containing([tmp_path], secret.encode()) == []  # trace, checkpoint db and its WAL, all


def test_an_http_error_and_the_failure_it_causes_never_show_the_secret(
        tmp_path: Path, spec: Path, script: Path, secret: str, server: EchoServer) -> None:
    done = cli("run", str(spec), "--input", f"url={server.url}/broken", "--script", str(script), "--trace",
               str(tmp_path / "trace.jsonl"), "--checkpoint", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    failure = json.loads(done.stdout)["failure"]
    assert failure["kind"] == "tool"
    assert "could not fetch" in failure["message"] and "credential=[REDACTED]" in failure["message"]
    assert secret not in done.stdout + done.stderr
    assert files_containing([tmp_path], secret.encode()) == []


def test_a_secret_that_is_not_set_stops_the_run_before_it_starts(
        tmp_path: Path, spec: Path, script: Path, server: EchoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    runner = compile_runner(spec, tmp_path / "keyed_search_runner.py")
    log = tmp_path / "calls.jsonl"
    for command in (["run", str(spec)], ["batch", str(spec)]):
        extra = ["--inputs", str(tmp_path / "cases.jsonl")] if command[0] == "batch" else [
            "--input", f"url={server.url}/echo"]
        done = cli(*command, *extra, "--script", str(script), cwd=tmp_path, env={"STATEWRIGHT_SCRIPT_LOG": str(log)})
        assert done.returncode == 2, done.stderr
        assert f"the environment variable {NAME} is not set" in done.stderr
        assert "tool std.http_get (" in done.stderr and "keyed_search.fsm:5:5" in done.stderr
    done = runner_process(sys.executable, runner, "--input", f"url={server.url}/echo", "--script", str(script),
                          cwd=tmp_path, env={"STATEWRIGHT_SCRIPT_LOG": str(log)})
    assert done.returncode == 2 and f"{NAME} is not set" in done.stderr
    assert server.requests == [] and not log.exists()  # no request and no model call was made


def test_an_empty_secret_is_refused_like_a_missing_one(tmp_path: Path, spec: Path, script: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, "")
    done = cli("run", str(spec), "--input", "url=http://127.0.0.1/echo", "--script", str(script), cwd=tmp_path)
    assert done.returncode == 2 and f"the environment variable {NAME} is empty" in done.stderr


def test_a_secret_a_header_cannot_carry_is_refused(tmp_path: Path, spec: Path, script: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, "line\r\nX-Injected: yes")
    done = cli("run", str(spec), "--input", "url=http://127.0.0.1/echo", "--script", str(script), cwd=tmp_path)
    assert done.returncode == 2
    assert f"the environment variable {NAME} holds a line break, which an HTTP header cannot carry" in done.stderr
    assert "X-Injected" not in done.stderr  # the value itself is never shown


def test_test_blocks_run_without_the_secret(tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    done = cli("test", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    runner = compile_runner(spec, tmp_path / "keyed_search_runner.py")
    done = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
    assert done.returncode == 0 and "PASS  a page is read" in done.stdout


def test_the_python_api_fails_a_run_whose_secret_is_missing_and_saves_nothing(
        tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    machine = statewright.load(spec)
    client = ScriptedClient(Script.from_json({"agent": {"read": ["A summary."]}}))
    checkpoint = str(tmp_path / "runs.db")
    result = machine.run({"url": "http://127.0.0.1/echo"}, client=client, checkpoint=checkpoint, run_id="r1",
                         workspace=str(tmp_path / "ws"))
    assert result.status == "failed" and result.failure is not None and result.failure.kind == "secret"
    assert NAME in result.failure.message and client.calls == []
    monkeypatch.setenv(NAME, "now-it-is-set")
    # nothing was checkpointed: the same run id starts again once the secret is there
    again = machine.run({"url": "http://127.0.0.1:9/echo"}, client=client, checkpoint=checkpoint, run_id="r1",
                        workspace=str(tmp_path / "ws"))
    assert again.failure is not None and again.failure.kind == "tool"


AGENT_FETCH = textwrap.dedent(f"""\
    machine agent_fetch {{
        tool std.http_get {{
            allow ["127.0.0.1"]
            secrets [{NAME}]
            headers {{
                "X-Search-Credential" "${{{NAME}}}"
            }}
        }}

        agent reader {{
            prompt "You read web pages."
            tools [std.http_get]
        }}

        start state read {{
            agent reader
            do "Fetch the page and summarize it."
            -> done
        }}

        final state done
    }}
""")


def test_a_tool_result_echoing_the_secret_reaches_the_model_redacted(
        tmp_path: Path, secret: str, server: EchoServer) -> None:
    machine = statewright.load_text(AGENT_FETCH, "agent_fetch.fsm")
    call = {"tool_calls": [{"name": "std_http_get", "arguments": {"url": f"{server.url}/echo"}}]}
    client = ScriptedClient(Script.from_json({"agent": {"read": [call, "A summary."]}}))
    sink: list[dict[str, Any]] = []
    trace = tmp_path / "trace.jsonl"
    result = machine.run({}, client=client, workspace=str(tmp_path / "ws"), trace=str(trace), trace_content=True,
                         listeners=[lambda event, fields: sink.append({"event": event, **fields})])
    assert result.ok and result.result == "A summary.", result.failure
    assert server.requests[0]["headers"]["x-search-credential"] == secret
    tool_message = client.received[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "[REDACTED]" in tool_message["content"]
    assert secret not in json.dumps(client.received) and secret not in json.dumps(sink, default=str)
    assert "[REDACTED]" in trace.read_text() and secret not in trace.read_text()


# ---- the registry: headers, redirects, user tools ---------------------------------------------------


def _http_registry(tmp_path: Path, secrets: dict[str, str]) -> ToolRegistry:
    spec = ToolSpec("std.http_get", options={"allow": ["127.0.0.1", "localhost"]}, secrets=(NAME,),
                    headers=(("X-Search-Credential", f"${{{NAME}}}"), ("X-Plain", "$${not a secret}"),
                             ("User-Agent", "keyed-search/1")),
                    query=(("credential", f"${{{NAME}}}"),))
    return ToolRegistry({"std.http_get": spec}, str(tmp_path), secrets=secrets)


def test_headers_are_written_as_declared_and_user_agent_replaces_the_default(
        tmp_path: Path, server: EchoServer) -> None:
    tools = _http_registry(tmp_path, {NAME: "v4lue-of-the-credential"})
    body = json.loads(tools.call("std.http_get", {"url": f"{server.url}/echo?credential=model-chosen"})["body"])
    headers = server.requests[0]["headers"]
    assert headers["x-plain"] == "${not a secret}" and headers["user-agent"] == "keyed-search/1"
    # the model's own parameter of the same name is replaced, never sent beside the secret
    assert server.requests[0]["path"] == "/echo?credential=v4lue-of-the-credential"
    assert body["headers"]["x-search-credential"] == "[REDACTED]"


def test_a_redirect_to_another_origin_drops_the_secret_header(tmp_path: Path, server: EchoServer) -> None:
    tools = _http_registry(tmp_path, {NAME: "v4lue-of-the-credential"})
    tools.call("std.http_get", {"url": f"{server.url}/to/localhost"})
    first, second = server.requests
    assert first["headers"]["x-search-credential"] == "v4lue-of-the-credential"
    assert "x-search-credential" not in second["headers"] and second["headers"]["x-plain"] == "${not a secret}"


def test_a_tool_without_its_secret_fails_its_call_naming_the_variable(tmp_path: Path, server: EchoServer) -> None:
    with pytest.raises(ToolError, match=f"needs the secret {NAME}, and the environment variable {NAME} is not set"):
        _http_registry(tmp_path, {}).call("std.http_get", {"url": f"{server.url}/echo"})
    assert server.requests == []


USER_TOOL = '''
from collections.abc import Mapping

SEEN = []


def lookup(query: str, secrets: Mapping[str, str]) -> dict:
    """Look a term up in the keyed index."""
    SEEN.append(dict(secrets))
    return {"query": query, "echo": f"key={secrets['SEARCH_CREDENTIAL']}"}


def keyless(query: str) -> str:
    """Has no secrets parameter."""
    return query
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"keyed_tools_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(USER_TOOL, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_user_tool_gets_its_secrets_the_model_never_sees_them(
        tmp_path: Path, user_module: str, secret: str) -> None:
    source = textwrap.dedent(f"""\
        machine keyed_lookup {{
            input term: str

            tool lookup = "{user_module}:lookup" {{
                secrets [{NAME}]
            }}

            start state find {{
                call lookup(query = term)
                -> done
            }}

            final state done
        }}
    """)
    machine = statewright.load_text(source, "keyed_lookup.fsm")
    result = machine.run({"term": "fsm"}, workspace=str(tmp_path / "ws"))
    assert result.ok, result.failure
    assert result.result == {"query": "fsm", "echo": "key=[REDACTED]"}
    assert sys.modules[user_module].SEEN == [{NAME: secret}]

    tools = ToolRegistry({"lookup": ToolSpec("lookup", f"{user_module}:lookup", secrets=(NAME,))}, str(tmp_path),
                         secrets={NAME: secret})
    parameters = tools.schema("lookup")["function"]["parameters"]
    assert list(parameters["properties"]) == ["query"] and parameters["required"] == ["query"]
    with pytest.raises(ToolError, match="unexpected argument"):  # a model cannot pass them either
        tools.call("lookup", {"query": "x", "secrets": {NAME: "forged"}})


def test_a_user_tool_that_declares_secrets_needs_a_parameter_for_them(tmp_path: Path, user_module: str) -> None:
    tools = ToolRegistry({"keyless": ToolSpec("keyless", f"{user_module}:keyless", secrets=(NAME,))},
                         str(tmp_path), secrets={NAME: "x" * 12})
    with pytest.raises(ToolError, match="declares secrets \\[SEARCH_CREDENTIAL\\], but .* has no 'secrets' parameter"):
        tools.schema("keyless")


def test_the_secret_names_are_in_the_ir_and_the_runner_but_never_a_value(spec: Path, secret: str) -> None:
    dumped = cli("dump", str(spec))
    assert dumped.returncode == 0, dumped.stderr
    tool = next(t for t in json.loads(dumped.stdout)["tools"] if t["name"] == "std.http_get")
    assert tool["secrets"] == [NAME]
    assert tool["headers"] == [{"name": "X-Search-Credential", "value": f"${{{NAME}}}"},
                               {"name": "X-Client", "value": "statewright"}]
    assert tool["query"] == [{"name": "credential", "value": f"${{{NAME}}}"}]
    assert secret not in dumped.stdout and os.environ[NAME] == secret
