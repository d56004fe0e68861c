"""Sinks that hostile text cannot break, end to end: what a model or a tool produced — a lone surrogate, a file
name that is not UTF-8, terminal escape sequences, an API key echoed back — reaches stdout JSON, stderr, the
trace, `trace show`, the checkpoint and a resume intact where it is data, escaped where a terminal would obey
it, redacted where it is a secret, and never makes encoding fail. Every run goes through the real litellm HTTP
path to a local OpenAI-compatible server, in a fresh process, as users run it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, files_containing, read_events, runner_process
from support.fake_openai_server import Fail, FakeOpenAIServer, Reply

KEY = "sk-test-SINKS-0123456789abcdef"

READS_BACK = """\
machine relay {
    model "openai/relay"

    agent relay {
        prompt "You pass text on."
    }

    start state first {
        agent relay
        do "Say something."
        -> second
    }

    state second {
        agent relay
        do "Repeat: {{ first.output }}"
        -> done
    }

    final state done {
        result "{{ first.output }} | {{ second.output }}"
    }
}
"""


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def environment(server: FakeOpenAIServer) -> dict[str, str]:
    env = {"OPENAI_API_BASE": server.url + "/v1", "OPENAI_API_KEY": KEY}
    env.pop("PYTHONIOENCODING", None)
    return env


def spec_file(tmp_path: Path, text: str = READS_BACK) -> Path:
    path = tmp_path / "relay.fsm"
    path.write_text(text, encoding="utf-8")
    return path


def request_texts(server: FakeOpenAIServer) -> list[str]:
    return [str(r.body["messages"][-1]["content"]) for r in server.requests if r.body is not None]


# ---- lone surrogates ---------------------------------------------------------------------------------

SURROGATE_REPLY = "half an emoji: \ud83d, and the rest"


def test_a_lone_surrogate_in_a_reply_breaks_no_sink_of_statewright_run(server: FakeOpenAIServer,
                                                                       tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    server.enqueue(Reply(text=SURROGATE_REPLY), Reply(text="repeated"))  # sent as JSON: "\ud83d"
    trace, db = tmp_path / "trace.jsonl", tmp_path / "runs.db"
    common = ["run", str(spec), "--checkpoint", str(db), "--run-id", "r1", "--retries", "0"]
    done = cli(*common, "--trace", str(trace), "--trace-content", cwd=tmp_path, env=environment(server))

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == f"{SURROGATE_REPLY} | repeated"  # the value itself, losslessly
    # the next request carries the text the HTTP client can encode: U+FFFD for the lone half
    assert request_texts(server)[1] == "Repeat: half an emoji: \ufffd, and the rest"
    calls = [e for e in read_events(trace) if e["event"] == "llm_call"]
    assert calls[0]["reply"]["content"] == SURROGATE_REPLY
    shown = cli("trace", "show", str(trace), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr

    again = cli(*common[:-2], "--resume", "r1", cwd=tmp_path, env=environment(server))  # the stored result
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["result"] == result["result"]
    assert len(server.requests) == 2


def test_a_lone_surrogate_in_a_reply_breaks_no_sink_of_a_generated_runner(server: FakeOpenAIServer,
                                                                          tmp_path: Path) -> None:
    runner = compile_runner(spec_file(tmp_path), tmp_path / "relay_runner.py")
    server.enqueue(Reply(text=SURROGATE_REPLY), Reply(text="repeated"))
    trace = tmp_path / "trace.jsonl"
    done = runner_process(sys.executable, runner, "--trace", str(trace), "--trace-content", "--checkpoint",
                          str(tmp_path / "runs.db"), "--retries", "0", cwd=tmp_path, env=environment(server))

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["result"] == f"{SURROGATE_REPLY} | repeated"
    assert [e["event"] for e in read_events(trace)][-1] == "run_end"


LISTS_FILES = """\
machine lister {
    model "openai/lister"

    agent reader {
        prompt "You read file lists."
    }

    start state listing {
        call std.list_files()
        -> look
    }

    state look {
        agent reader
        do "These are the files: {{ listing.output }}"
        -> done
    }

    final state done {
        result "{{ listing.output }}"
    }
}
"""


@pytest.mark.parametrize("face", ["statewright run", "generated runner"])
def test_a_file_name_that_is_not_utf8_crashes_neither_the_run_nor_its_resume(server: FakeOpenAIServer,
                                                                             tmp_path: Path, face: str) -> None:
    spec = spec_file(tmp_path, LISTS_FILES)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name", encoding="utf-8")
    # the first model call fails: the run stops with its checkpoint, and the resume sends the list again
    server.enqueue(Fail(500), Reply(text="seen"))
    trace, db = tmp_path / "trace.jsonl", tmp_path / "runs.db"
    options = ["--workspace", str(workspace), "--checkpoint", str(db), "--trace", str(trace), "--trace-content",
               "--retries", "0", "--run-id", "r1"]
    if face == "statewright run":
        def run(*extra: str) -> subprocess.CompletedProcess[str]:
            return cli("run", str(spec), *options, *extra, cwd=tmp_path, env=environment(server))
    else:
        runner = compile_runner(spec, tmp_path / "lister_runner.py")

        def run(*extra: str) -> subprocess.CompletedProcess[str]:
            return runner_process(sys.executable, runner, *options, *extra, cwd=tmp_path, env=environment(server))

    stopped = run()
    assert stopped.returncode == 1, stopped.stderr
    assert json.loads(stopped.stdout)["failure"]["kind"] == "model"
    assert "surrogates not allowed" not in stopped.stdout + stopped.stderr

    resumed = run("--resume", "r1")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["result"] == '["' + os.fsdecode(b"caf\xe9.txt") + '"]'
    assert request_texts(server)[-1] == 'These are the files: ["caf\ufffd.txt"]'
    tools = [e for e in read_events(trace) if e["event"] == "tool_call"]
    assert tools[0]["result"] == [os.fsdecode(b"caf\xe9.txt")]  # the trace keeps the name's byte, escaped


# ---- terminal escapes --------------------------------------------------------------------------------

# clears the screen, retitles the window, moves the cursor back and prints a fake line; a C1 control and a
# right-to-left override besides
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\rall tests passed\x1b[1A\x9b31m\u202eevil"
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b", "\u202e")

TYPED = """\
machine scorer {
    model "openai/scorer"

    type Score {
        score: int
    }

    agent scorer {
        prompt "You score."
    }

    start state talk {
        agent scorer
        do "Say something."
        -> score
    }

    state score {
        agent scorer
        do "Score: {{ talk.output }}"
        output Score
        retries 0
        when "the score is honest" -> done
        otherwise -> done
    }

    final state done
}
"""


def test_model_text_reaches_no_terminal_raw_through_run_or_trace_show(server: FakeOpenAIServer,
                                                                      tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TYPED)
    server.enqueue(Reply(text=HOSTILE), Reply(text=json.dumps({"score": HOSTILE})))
    trace = tmp_path / "trace.jsonl"
    done = cli("run", str(spec), "--trace", str(trace), "--trace-content", "--retries", "0", cwd=tmp_path,
               env=environment(server))

    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert repr(HOSTILE) in result["failure"]["message"]  # the reply is named in the message ...
    for raw in RAW_CONTROLS:  # ... and nothing of it a terminal would obey, on stdout or stderr
        assert raw not in done.stdout, repr(raw)
        assert raw not in done.stderr, repr(raw)
    assert "\\x1b[2J" in done.stderr  # the summary shows the escape as text

    shown = cli("trace", "show", str(trace), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    for raw in RAW_CONTROLS:
        assert raw not in shown.stdout, repr(raw)
    assert "\\x1b]0;pwned\\x07" in shown.stdout  # the re-ask names the reply, escaped
    assert not [line for line in shown.stdout.splitlines() if line.startswith("all tests passed")]


def test_trace_show_escapes_every_field_a_model_or_tool_wrote(tmp_path: Path) -> None:
    """Each kind of event, with hostile text in each field a run takes from a model, a tool or an input."""
    trace = tmp_path / "trace.jsonl"
    events: list[dict[str, Any]] = [
        {"event": "run_start", "run_id": HOSTILE, "machine": "m", "inputs": {"topic": HOSTILE}},
        {"event": "state_enter", "state": "s", "visit": 1},
        {"event": "llm_call", "role": "agent", "state": "s", "agent": "a", "model": HOSTILE, "attempts": 1},
        {"event": "llm_error", "role": "agent", "attempts": 2, "error": HOSTILE},
        {"event": "tool_call", "tool": "std.read_file", "ok": False, "error": HOSTILE},
        {"event": "verdict", "choice": "none", "reason": HOSTILE},
        {"event": "reask", "role": "agent", "attempt": 1, "error": HOSTILE},
        {"event": "transition", "from": "s", "to": "s", "cause": "verifier", "reason": HOSTILE},
        {"event": "newer_event", "text": HOSTILE},
        {"event": "run_end", "status": "failed", "failure": {"kind": "output", "message": HOSTILE}},
        {"event": "designer_start", "output": HOSTILE, "model": "m", "task": HOSTILE},
        {"event": "designer_end", "ok": False, "attempts": 1, "error": HOSTILE},
    ]
    trace.write_text("".join(json.dumps({**e, "seq": i, "time": "t"}) + "\n" for i, e in enumerate(events)),
                     encoding="utf-8")
    shown = cli("trace", "show", str(trace), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    for raw in RAW_CONTROLS:
        assert raw not in shown.stdout, repr(raw)
    assert shown.stdout.count("all tests passed") >= 10 and "\nall tests passed" not in shown.stdout


# ---- secrets -----------------------------------------------------------------------------------------


def test_a_key_a_provider_echoes_back_is_redacted_on_stdout_stderr_and_in_the_checkpoint(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    echo = f"the key you sent is {KEY}"
    server.enqueue(Reply(text=echo), Reply(text=f"again: Bearer {KEY}"))
    db = tmp_path / "runs.db"
    done = cli("run", str(spec), "--checkpoint", str(db), "--trace", str(tmp_path / "trace.jsonl"),
               "--trace-content", cwd=tmp_path, env=environment(server))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "the key you sent is [REDACTED] | again: Bearer [REDACTED]"
    assert KEY not in done.stdout + done.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    secret = KEY.removeprefix("sk-test-").encode()
    assert files_containing([tmp_path], secret) == []  # database, its -wal, trace


def test_a_key_echoed_into_a_batch_is_redacted_in_its_results(server: FakeOpenAIServer, tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    server.enqueue(Reply(text=f"key {KEY}"), Reply(text="done"))
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"inputs": {}}\n', encoding="utf-8")
    out = tmp_path / "results.jsonl"
    done = cli("batch", str(spec), "--inputs", str(cases), "--out", str(out), "--concurrency", "1", cwd=tmp_path,
               env=environment(server))
    assert done.returncode == 0, done.stdout + done.stderr
    assert KEY not in out.read_text(encoding="utf-8") and "[REDACTED]" in out.read_text(encoding="utf-8")
