"""Secrets in every encoding, through every tool path, hidden from every sink.

Canary secrets made of every printable ASCII character (and a few chosen ones with + / = % & and spaces)
go into std.http_get's header and query (sent percent-encoded; the server echoes both back, JSON-escaped),
into a user tool that returns them in every form (raw, quoted, plus-quoted, repr, JSON) and into one that
fails naming them (a KeyError is a repr). The run uses them through an action state, an agent's tool calls
and a fetch that fails with the URL in its error. Then every sink is searched for every encoding: the
RunResult on stdout, stderr, the trace, the checkpoint database (and its WAL), `trace show`, the messages
sent to the model, a batch's results and traces, and — in the slow test — Temporal's history (every
activity's and the workflow's payloads and results) and its status and trace queries.

The variable's name holds none of KEY, TOKEN, SECRET or PASSWORD, so only the declared-secret redaction
(trace.secret_forms, through the one redaction point of each sink) can hide it.
"""

from __future__ import annotations

import base64
import json
import os
import string
import sys
import textwrap
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, runner_process
from support.echo_server import EchoServer, echo_server

import statewright
from statewright.runtime.scripted import Script, ScriptedClient

NAME = "CANARY_CREDENTIAL"
CANARIES = [
    "".join(chr(c) for c in range(0x20, 0x7F)),  # every printable ASCII character, space to ~
    "p+q/r=s%t&u v",
    "==//++%%&& a+b/c=d%25e&f g",
    "z" + string.punctuation[::-1] + " " + string.ascii_letters,
]

TOOLS = '''
import json
import urllib.parse


def leak(query: str, secrets) -> dict:
    """Return the credential in every form a tool might."""
    value = secrets["CANARY_CREDENTIAL"]
    return {"raw": value, "quoted": urllib.parse.quote(value, safe=""), "path": urllib.parse.quote(value),
            "plus": urllib.parse.quote_plus(value), "repr": repr(value), "json": json.dumps(value),
            "ascii": json.dumps({"k": value}, ensure_ascii=True), "text": f"the credential is {value}!",
            value: "as a key"}


def fail(query: str, secrets) -> str:
    """Fail, naming the credential."""
    raise KeyError(secrets["CANARY_CREDENTIAL"])
'''

SPEC = textwrap.dedent(f"""\
    machine canary {{
        input url: str
        input broken: str

        tool std.http_get {{
            allow ["127.0.0.1"]
            secrets [{NAME}]
            headers {{
                "X-Canary" "${{{NAME}}}"
            }}
            query {{
                key "${{{NAME}}}"
            }}
        }}
        tool leak = "canary_tools:leak" {{
            secrets [{NAME}]
        }}
        tool fail = "canary_tools:fail" {{
            secrets [{NAME}]
        }}

        agent reader {{
            prompt "You read pages."
            tools [std.http_get, leak, fail]
        }}

        start state fetch {{
            call std.http_get(url = url)
            -> echo
        }}

        state echo {{
            call leak(query = "q")
            -> read
        }}

        state read {{
            agent reader
            do "Read {{{{ fetch.output.body }}}} and {{{{ echo.output }}}}."
            -> again
        }}

        state again {{
            call std.http_get(url = broken)
            -> done
        }}

        final state done
    }}
""")


def encodings(value: str) -> list[str]:
    """Every form a sink could show `value` in, worked out here apart from the code under test."""
    forms = {value, value.strip(), urllib.parse.quote(value, safe=""), urllib.parse.quote(value),
             urllib.parse.quote_plus(value), repr(value)[1:-1]}
    escaped = {json.dumps(form, ensure_ascii=ascii_only)[1:-1] for form in forms for ascii_only in (True, False)}
    return sorted(forms | escaped)


def leaks(value: str, texts: dict[str, str | bytes]) -> list[tuple[str, str]]:
    """(sink, form) for every form of `value` found in any sink."""
    found = []
    for sink, text in texts.items():
        for form in encodings(value):
            if (form.encode("utf-8") if isinstance(text, bytes) else form) in text:
                found.append((sink, form))
    return found


def files_under(*roots: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for root in roots for path in root.rglob("*") if path.is_file()}


@pytest.fixture(params=range(len(CANARIES)), ids=["printable-ascii", "plus-slash", "percent-amp", "punctuation"])
def canary(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    value = CANARIES[request.param]
    monkeypatch.setenv(NAME, value)
    for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(variable, raising=False)
    return value


@pytest.fixture
def server() -> Iterator[EchoServer]:
    with echo_server() as running:
        yield running


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "canary_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "canary.fsm").write_text(SPEC, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    yield tmp_path
    sys.modules.pop("canary_tools", None)


def agent_script(server: EchoServer) -> dict[str, Any]:
    calls = {"tool_calls": [{"name": "std_http_get", "arguments": {"url": f"{server.url}/echo?from=agent"}},
                            {"name": "leak", "arguments": {"query": "q"}},
                            {"name": "fail", "arguments": {"query": "q"}},
                            {"name": "std_http_get", "arguments": {"url": f"{server.url}/broken"}}]}
    return {"agent": {"read": [calls, "I read it."]}}


def check_the_run(canary: str, server: EchoServer, failure: dict[str, Any]) -> None:
    """The secret reached the service in its header and its query; the run failed at the broken fetch."""
    headers = [request["headers"].get("x-canary") for request in server.requests]
    assert headers and all(header == canary.strip(" \t") for header in headers)  # HTTP trims a header value
    assert all(request["path"].endswith("key=" + urllib.parse.quote(canary, safe="")) for request in server.requests)
    assert failure["kind"] == "tool" and failure["state"] == "again"
    assert "could not fetch" in failure["message"] and "key=[REDACTED]" in failure["message"]


def test_the_python_api_hides_every_form_from_every_sink(canary: str, server: EchoServer, project: Path) -> None:
    machine = statewright.load(project / "canary.fsm")
    client = ScriptedClient(Script.from_json(agent_script(server)))
    heard: list[dict[str, Any]] = []
    result = machine.run({"url": f"{server.url}/echo", "broken": f"{server.url}/broken"}, client=client,
                         workspace=str(project / "ws"), trace=str(project / "trace.jsonl"), trace_content=True,
                         checkpoint=str(project / "runs.db"), run_id="r1",
                         listeners=[lambda event, fields: heard.append({"event": event, **fields})])
    check_the_run(canary, server, result.failure.to_json() if result.failure else {})
    tool_messages = [m["content"] for m in client.received[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 4 and all("[REDACTED]" in m for m in tool_messages)
    assert "KeyError" in tool_messages[2] and "could not fetch" in tool_messages[3]
    sinks: dict[str, str | bytes] = {
        "result": json.dumps(result.to_json()), "messages to the model": json.dumps(client.received),
        "listeners": json.dumps(heard, default=str), **files_under(project / "ws"),
        **{name: data for name, data in files_under(project).items() if "trace" in name or "runs.db" in name},
    }
    assert leaks(canary, sinks) == []


def test_statewright_run_trace_show_and_a_runner_hide_every_form(canary: str, server: EchoServer,
                                                                  project: Path) -> None:
    script = project / "script.json"
    script.write_text(json.dumps(agent_script(server)), encoding="utf-8")
    inputs = ["--input", f"url={server.url}/echo", "--input", f"broken={server.url}/broken"]
    common = ["--script", str(script), "--trace-content"]
    done = cli("run", str(project / "canary.fsm"), *inputs, *common, "--trace", str(project / "cli.jsonl"),
               "--checkpoint", str(project / "cli.db"), cwd=project)
    assert done.returncode == 1, done.stderr
    check_the_run(canary, server, json.loads(done.stdout)["failure"])
    shown = cli("trace", "show", str(project / "cli.jsonl"))
    assert shown.returncode == 0 and "[REDACTED]" in shown.stdout
    runner = compile_runner(project / "canary.fsm", project / "canary_runner.py")
    ran = runner_process(sys.executable, runner, *inputs, *common, "--trace", str(project / "runner.jsonl"),
                         "--checkpoint", str(project / "runner.db"), cwd=project)
    assert ran.returncode == 1, ran.stderr
    assert "key=[REDACTED]" in ran.stderr  # the summary line names the failure, redacted
    sinks: dict[str, str | bytes] = {"run stdout": done.stdout, "run stderr": done.stderr,
                                     "trace show": shown.stdout, "runner stdout": ran.stdout,
                                     "runner stderr": ran.stderr, **files_under(project)}
    sinks = {name: text for name, text in sinks.items() if not name.endswith((".py", ".fsm", "script.json"))}
    assert leaks(canary, sinks) == []


def test_a_batch_hides_every_form_from_its_results_traces_and_checkpoints(canary: str, server: EchoServer,
                                                                          project: Path) -> None:
    script = project / "script.json"
    script.write_text(json.dumps(agent_script(server)), encoding="utf-8")
    cases = project / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{n}", "inputs": {"url": f"{server.url}/echo?n={n}",
                                                                    "broken": f"{server.url}/broken"}}) + "\n"
                             for n in range(3)), encoding="utf-8")
    out = project / "out" / "results.jsonl"
    out.parent.mkdir()
    done = cli("batch", str(project / "canary.fsm"), "--inputs", str(cases), "--script", str(script), "--out", str(out),
               "--trace", str(project / "out" / "traces"), "--trace-content", cwd=project)
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3 and {line["failure"]["kind"] for line in lines} == {"tool"}
    sinks: dict[str, str | bytes] = {"stdout": done.stdout, "stderr": done.stderr, **files_under(project / "out")}
    assert leaks(canary, sinks) == []


def test_every_form_of_an_environment_key_is_hidden_from_traces_and_checkpoints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key the environment holds (named ..._API_KEY) that a tool echoes in every form: each is hidden."""
    from statewright.runtime.trace import redact, sink_json

    key = CANARIES[0]
    monkeypatch.setenv("SERVICE_API_KEY", key)
    record = {f"form {n}": form for n, form in enumerate(encodings(key))}
    record["nested"] = [json.dumps({"inner": key}), {key: "as a key"}]
    (tmp_path / "envkey_tools.py").write_text(f"def echo() -> dict:\n    return {record!r}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = textwrap.dedent("""\
        machine envkey {
            tool echo = "envkey_tools:echo"
            start state s {
                call echo()
                -> done
            }
            final state done {
                result "{{ s.output }}"
            }
        }
    """)
    try:
        result = statewright.load_text(source, "envkey.fsm").run(
            {}, workspace=str(tmp_path / "ws"), trace=str(tmp_path / "t.jsonl"), trace_content=True,
            checkpoint=str(tmp_path / "c.db"), run_id="r1")
    finally:
        sys.modules.pop("envkey_tools", None)
    assert result.ok, result.failure
    sinks: dict[str, str | bytes] = {"sink_json": sink_json(record), "redact": redact(json.dumps(record)),
                                     "result": json.dumps(result.to_json()),
                                     **{name: data for name, data in files_under(tmp_path).items()
                                        if not name.endswith(".py")}}
    assert leaks(key, sinks) == []
    # and the trace still reads as JSON: redacted in its strings, not cut in its text
    for line in (tmp_path / "t.jsonl").read_text().splitlines():
        assert "event" in json.loads(line)


# ---- Temporal --------------------------------------------------------------------------------------------------


def _payload_texts(node: Any, out: list[str]) -> None:
    """Every payload's data in a history (as JSON: base64 `data` beside `metadata`), decoded."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "data" in item and "metadata" in item and isinstance(item["data"], str):
                out.append(base64.b64decode(item["data"]).decode("utf-8", errors="replace"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@pytest.mark.slow
def test_temporal_history_results_status_and_trace_hide_every_form(server: EchoServer, project: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("temporalio")
    from support.temporal_server import DevServer, temporal_cli

    if temporal_cli() is None:
        pytest.skip("no `temporal` program (statewright[temporal])")
    import asyncio
    import subprocess

    from statewright import api
    from statewright.runtime.temporal import (
        TemporalRunner,
        temporal_copy_trace,
        temporal_result,
        temporal_status,
    )
    from statewright.runtime.trace import Trace

    machine = api.runtime_machine(api.check_path(project / "canary.fsm"))
    with DevServer() as temporal:
        for canary in CANARIES[:2]:
            env = {**os.environ, NAME: canary, "PYTHONPATH": str(project)}
            for variable in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
                env.pop(variable, None)
            queue = f"canary-{CANARIES.index(canary)}"
            worker = subprocess.Popen([sys.executable, "-m", "statewright", "worker", str(project / "canary.fsm"),
                                       "--temporal", temporal.address, "--task-queue", queue], cwd=project, env=env,
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            try:
                assert worker.stdout is not None
                while "serving" not in (line := worker.stdout.readline()):
                    assert line, "the worker did not start"
                runner = TemporalRunner(machine, temporal.address, task_queue=queue,
                                        script=Script.from_json(agent_script(server)))
                run_id = f"canary-run-{queue}"

                async def go(run_id: str = run_id, runner: TemporalRunner = runner) -> tuple[Any, ...]:
                    handle = await runner.start({"url": f"{server.url}/echo", "broken": f"{server.url}/broken"},
                                                run_id=run_id, trace=True, trace_content=True)
                    result = await asyncio.wait_for(temporal_result(handle), 120)
                    events: list[dict[str, Any]] = []
                    await temporal_copy_trace(handle, Trace(sink=events))
                    history = await handle.fetch_history()
                    status = await temporal_status(temporal.address, run_id)
                    return result, events, history.to_json_dict(), status

                result, events, history, status = asyncio.run(go())
            finally:
                worker.terminate()
                output = worker.communicate(timeout=30)[0]
            check_the_run(canary, server, result.failure.to_json() if result.failure else {})
            payloads: list[str] = []
            _payload_texts(history, payloads)
            assert any("[REDACTED]" in text for text in payloads)  # the activities' results were there, hidden
            sinks: dict[str, str | bytes] = {"result": json.dumps(result.to_json()), "trace": json.dumps(events),
                                             "status": json.dumps(status, default=str), "worker output": output,
                                             **{f"payload {n}": text for n, text in enumerate(payloads)}}
            assert leaks(canary, sinks) == []
            server.requests.clear()
