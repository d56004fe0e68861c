"""Model faults end to end: `statewright run` over the real HTTP path against a local OpenAI-compatible server
that fails on cue — failures are typed, checkpoints survive them, tools and outputs are repaired or re-asked
within their bounds, fallbacks take over, and the API key ends up nowhere on disk. Every test runs on both
paths: the native client's (the default for `openai/...` models) and litellm's (--model-client litellm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import files_containing, read_events
from support.fake_openai_server import Fail, FakeOpenAIServer, Gzipped, Reply, Trickle

from statewright import cli
from statewright.runtime.checkpoint import CheckpointStore

SPEC = """\
machine notes {
    input topic: str
    model "openai/gpt-4o-mini"

    type Score {
        score: int "0-100"
    }

    agent writer {
        prompt "You write notes."
        tools [std.write_file]
    }

    agent critic {
        prompt "You score notes."
        model "openai/gpt-4o"
        fallbacks ["openai/gpt-4o-mini"]
    }

    start state draft {
        agent writer
        do "Write notes about {{ topic }} into notes.txt, then say what you wrote."
        -> review
    }

    state review {
        agent critic
        do "Score the notes."
        output Score
        retries 1
        when output.score >= 50 -> done
        otherwise -> weak
    }

    final state done {
        result "{{ draft.output }} / {{ review.output.score }}"
    }

    final state weak
}
"""
PRIMARY, BACKUP = "primary-model", "backup-model"  # what the server sees; litellm strips "openai/"
TO_SERVER = ["--model-map", f"openai/gpt-4o=openai/{PRIMARY}", "--model-map", f"openai/gpt-4o-mini=openai/{BACKUP}"]
FAST = ["--retries", "1", "--retry-delay", "0"]


@pytest.fixture(autouse=True, params=["native", "litellm"])
def model_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path every call takes, for the run in process and for the processes a test starts."""
    monkeypatch.setenv("STATEWRIGHT_MODEL_CLIENT", "auto" if request.param == "native" else "litellm")
    return str(request.param)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_BASE", running.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
        yield running


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the default workspace goes under the current directory
    path = tmp_path / "notes.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


def statewright_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code = cli.main(["run", *args])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


def bodies(server: FakeOpenAIServer, model: str) -> list[dict[str, Any]]:
    return [r.body for r in server.requests_for(model) if r.body is not None]


def test_a_model_failing_past_its_retries_is_a_typed_failure_and_resume_finishes_after_recovery(
        server: FakeOpenAIServer, spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes on FSMs."), model=BACKUP)
    server.enqueue(Fail(500, "upstream exploded"), Fail(500, "upstream exploded"), model=PRIMARY)
    server.enqueue(Fail(500, "backup down too"), Fail(503, "backup still down"), model=BACKUP)
    db = str(tmp_path / "runs.db")
    common = [str(spec), "--checkpoint", db, *TO_SERVER, *FAST]

    code, result, err = statewright_run(capsys, *common, "--input", "topic=FSMs", "--run-id", "r1")

    assert code == 1 and result is not None
    failure = result["failure"]
    assert (failure["kind"], failure["state"]) == ("model", "review")
    assert f"'openai/{PRIMARY}'" in failure["message"]  # the model the state asked for ...
    assert "backup still down" in failure["message"]  # ... and the last error, from its fallback
    assert "4 attempt(s)" in failure["message"]  # 1 + 1 retry, for each of the two models
    assert len(bodies(server, PRIMARY)) == 2 and len(bodies(server, BACKUP)) == 3
    assert "resume r1 --checkpoint" in err  # the command that continues it
    snapshot = CheckpointStore(db).load("r1")
    assert snapshot is not None and (snapshot.head.status, snapshot.head.state) == ("running", "review")
    assert snapshot.outputs["draft"] == "Notes on FSMs."

    server.enqueue(Reply(json={"score": 80}), model=PRIMARY)  # the provider has recovered
    code, result, _ = statewright_run(capsys, *common, "--resume", "r1")

    assert code == 0 and result is not None
    assert (result["path"], result["result"]) == (["draft", "review", "done"], "Notes on FSMs. / 80")
    assert len(bodies(server, BACKUP)) == 3  # the completed draft step was not asked again


def test_tool_arguments_that_are_not_json_are_fed_back_and_the_next_call_succeeds(
        server: FakeOpenAIServer, spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(
        Reply(tool_calls=[{"name": "std_write_file", "arguments": '{"path": "notes.txt", "content": '}]),
        Reply(tool_calls=[{"name": "std_write_file", "arguments": {"path": "notes.txt", "content": "FSM notes"}}]),
        Reply(text="I wrote notes.txt."),
        model=BACKUP,
    )
    server.enqueue(Reply(json={"score": 90}), model=PRIMARY)
    trace = tmp_path / "trace.jsonl"

    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", "--run-id", "r2",
                                      "--trace", str(trace), *TO_SERVER, *FAST)

    assert code == 0 and result is not None and result["result"] == "I wrote notes.txt. / 90"
    second = bodies(server, BACKUP)[1]["messages"]
    [fed_back] = [m for m in second if m["role"] == "tool"]
    assert fed_back["content"].startswith("error: the arguments are not a valid JSON object")
    tool_calls = [e for e in read_events(trace) if e["event"] == "tool_call"]
    assert [(e["tool"], e["ok"]) for e in tool_calls] == [("std.write_file", False), ("std.write_file", True)]
    # no --workspace: the run's own directory under the current one, named in the result and the trace
    workspace = tmp_path / ".statewright" / "runs" / "r2" / "workspace"
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "FSM notes"
    assert result["workspace"] == str(workspace)
    assert read_events(trace)[0]["workspace"] == str(workspace)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".statewright", "notes.fsm", "trace.jsonl"]


def test_a_fallback_model_takes_over_when_the_primary_keeps_failing(
        server: FakeOpenAIServer, spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes."), Reply(json={"score": 75}), model=BACKUP)
    server.enqueue(Fail(503, "overloaded"), Fail(429, "slow down"), model=PRIMARY)
    trace = tmp_path / "trace.jsonl"

    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", "--trace", str(trace),
                                      *TO_SERVER, *FAST)

    assert code == 0 and result is not None and result["result"] == "Notes. / 75"
    [review] = [e for e in read_events(trace) if e["event"] == "llm_call" and e["state"] == "review"]
    assert review["model"] == f"openai/{BACKUP}" and review["attempts"] == 3
    [fallback] = [e for e in review["events"] if e["type"] == "fallback"]
    assert (fallback["model"], fallback["after"]) == (f"openai/{BACKUP}", f"openai/{PRIMARY}")
    assert "slow down" in fallback["error"]


def test_json_in_a_fence_with_a_trailing_comma_is_repaired_without_asking_again(
        server: FakeOpenAIServer, spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes."), model=BACKUP)
    server.enqueue(Reply(text='Here you go:\n```json\n{"score": 77,}\n```'), model=PRIMARY)
    trace = tmp_path / "trace.jsonl"

    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", "--trace", str(trace),
                                      *TO_SERVER, *FAST)

    assert code == 0 and result is not None and result["result"] == "Notes. / 77"
    assert len(bodies(server, PRIMARY)) == 1
    [repair] = [e for e in read_events(trace) if e["event"] == "repair"]
    assert repair["state"] == "review" and repair["repairs"]


def test_a_reply_that_breaks_the_schema_is_sent_back_with_the_errors_and_asked_again(
        server: FakeOpenAIServer, spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes."), model=BACKUP)
    server.enqueue(Reply(json={"score": "very good"}), Reply(json={"score": 64}), model=PRIMARY)

    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", *TO_SERVER, *FAST)

    assert code == 0 and result is not None and result["result"] == "Notes. / 64"
    first, second = bodies(server, PRIMARY)
    added = second["messages"][len(first["messages"]):]
    assert [m["role"] for m in added] == ["assistant", "user"]
    assert "very good" in added[0]["content"] and "score" in added[1]["content"]


def test_output_that_never_validates_ends_after_its_retries(server: FakeOpenAIServer, spec: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes."), model=BACKUP)
    server.enqueue(Reply(text="{not json"), Reply(json={"score": "high"}), Reply(json={"score": 99}),
                   model=PRIMARY)

    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", *TO_SERVER, *FAST)

    assert code == 1 and result is not None
    failure = result["failure"]
    assert (failure["kind"], failure["state"]) == ("output", "review")
    assert "after 2 attempt(s)" in failure["message"]  # `retries 1`: one more try, and no more
    assert len(bodies(server, PRIMARY)) == 2


def test_max_tokens_reaches_the_provider_on_every_call(server: FakeOpenAIServer, spec: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(text="Notes."), model=BACKUP)
    server.enqueue(Reply(json={"score": 51}), model=PRIMARY)

    code, _, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", "--max-tokens", "64",
                                 *TO_SERVER, *FAST)

    assert code == 0
    assert [r.body["max_tokens"] for r in server.requests if r.body] == [64, 64]


def test_the_api_key_is_nowhere_on_disk_after_a_traced_checkpointed_run_with_an_error(
        server: FakeOpenAIServer, spec: Path, tmp_path: Path) -> None:
    key = f"sk-test-SECRET-{uuid.uuid4().hex}"
    env_overrides = {"OPENAI_API_KEY": key, "OPENAI_API_BASE": server.url + "/v1"}
    # a provider that quotes the key back in its error text
    echo = f"Incorrect API key provided: {key}. Authorization: Bearer {key}"
    server.enqueue(
        Reply(tool_calls=[{"name": "std_write_file", "arguments": {"path": "notes.txt", "content": "notes"}}]),
        Reply(text="Wrote notes.txt."),
        model=BACKUP,
    )
    server.enqueue(Fail(500, echo), Fail(500, echo), model=PRIMARY)
    server.enqueue(Fail(500, echo), Fail(500, echo), model=BACKUP)
    logs = tmp_path / "logs"
    logs.mkdir()
    common = [str(spec), "--checkpoint", str(tmp_path / "runs.db"), "--trace", str(tmp_path / "trace.jsonl"),
              "--trace-content", *TO_SERVER, *FAST]

    def statewright_process(name: str, *args: str) -> int:
        with open(logs / f"{name}.out", "w") as out, open(logs / f"{name}.err", "w") as err:
            return subprocess.run([sys.executable, "-m", "statewright", "run", *common, *args], stdout=out,
                                  stderr=err, cwd=tmp_path, env={**os.environ, **env_overrides},
                                  check=False, timeout=120).returncode

    assert statewright_process("failing", "--input", "topic=FSMs", "--run-id", "r1") == 1
    assert "Incorrect API key provided" in (logs / "failing.out").read_text()  # the error is reported ...
    server.enqueue(Reply(json={"score": 70}), model=PRIMARY)
    assert statewright_process("resumed", "--resume", "r1") == 0

    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {key}"}  # the key was used
    assert (tmp_path / ".statewright" / "runs" / "r1" / "workspace" / "notes.txt").exists()
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert {"runs.db", "trace.jsonl", "logs/failing.err", "logs/resumed.out"} <= set(written)
    secret = key.removeprefix("sk-test-").encode()
    assert files_containing([tmp_path], secret) == []  # ... and the key is nowhere: db, wal, trace, logs


def test_timeout_is_one_deadline_for_a_whole_model_call(server: FakeOpenAIServer, spec: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # the writer's model trickles its reply a byte at a time: no read ever times out, the call's deadline does
    server.enqueue(Trickle(seconds_per_byte=0.2), Trickle(seconds_per_byte=0.2), model=BACKUP)
    trace = tmp_path / "trace.jsonl"
    started = time.monotonic()
    code, result, _ = statewright_run(capsys, str(spec), "--input", "topic=FSMs", *TO_SERVER, "--retries", "3",
                                      "--retry-delay", "0", "--timeout", "1", "--trace", str(trace))
    assert time.monotonic() - started < 5
    assert code == 1 and result is not None and result["failure"]["kind"] == "model"
    assert "no reply within" in result["failure"]["message"]


def test_the_seconds_limit_ends_a_stalled_call_as_a_limit(server: FakeOpenAIServer, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    limited = tmp_path / "limited.fsm"
    limited.write_text(SPEC.replace('    model "openai/gpt-4o-mini"\n',
                                    '    model "openai/gpt-4o-mini"\n    limits {\n        seconds 2\n    }\n'),
                       encoding="utf-8")
    server.enqueue(Trickle(seconds_per_byte=0.5), Trickle(seconds_per_byte=0.5), Trickle(seconds_per_byte=0.5),
                   model=BACKUP)
    started = time.monotonic()
    code, result, _ = statewright_run(capsys, str(limited), "--input", "topic=FSMs", *TO_SERVER, "--retries", "5",
                                      "--retry-delay", "0")
    assert time.monotonic() - started < 5  # not three attempts of the full time each
    assert code == 1 and result is not None
    assert (result["failure"]["kind"], result["failure"]["limit"]) == ("limit", "seconds")


MEASURED = """\
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=False)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(done.returncode)
"""


def statewright_measured(spec: Path, server: FakeOpenAIServer, tmp_path: Path) -> tuple[int, dict[str, Any], int]:
    """`statewright run SPEC` in a process of its own; its exit status, result and peak memory in MB."""
    wrapper = tmp_path / "measured.py"
    wrapper.write_text(MEASURED, encoding="utf-8")
    done = subprocess.run([sys.executable, str(wrapper), sys.executable, "-m", "statewright", "run", str(spec),
                           "--quiet", "--retries", "2", "--retry-delay", "0"], capture_output=True, text=True,
                          check=False, cwd=tmp_path, timeout=120,
                          env={**os.environ, "OPENAI_API_BASE": server.url + "/v1",
                               "OPENAI_API_KEY": "sk-test-dummy-0000"})
    return done.returncode, json.loads(done.stdout), int(done.stderr.strip().splitlines()[-1])


ONE_CALL = """\
machine one {
    model "openai/one"
    agent writer {
        prompt "You write."
    }
    start state write {
        agent writer
        do "Write."
        -> done
    }
    final state done
}
"""


def test_a_gzip_bomb_reply_ends_the_call_typed_in_bounded_memory(server: FakeOpenAIServer, tmp_path: Path) -> None:
    spec = tmp_path / "one.fsm"
    spec.write_text(ONE_CALL, encoding="utf-8")
    server.enqueue(Reply(text="a reply"))
    code, result, baseline = statewright_measured(spec, server, tmp_path)
    assert code == 0, result
    # 0.6 MB on the wire, 600 MB of JSON once inflated: what litellm would have parsed whole
    server.enqueue(Gzipped(inflated_bytes=600_000_000), Reply(text="never asked for"))
    code, result, peak = statewright_measured(spec, server, tmp_path)

    assert code == 1 and result["failure"]["kind"] == "model"
    assert "the reply is larger than the cap of 16,777,216 bytes (decompressed)" in result["failure"]["message"]
    assert len(server.requests) == 2  # not retried
    assert peak - baseline < 100, (baseline, peak)  # the cap and a little, not the inflated body


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_ends_statewright_run_at_once_naming_the_model_and_the_variable(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        status: int) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "one.fsm"
    spec.write_text(ONE_CALL, encoding="utf-8")
    server.enqueue(Fail(status, "Incorrect API key provided"), Reply(text="never served"))
    code, result, err = statewright_run(capsys, str(spec), "--retries", "3", "--retry-delay", "0.5")

    assert len(server.requests) == 1  # no retry, no backoff
    assert code == 1 and result is not None and result["failure"]["kind"] == "model"
    message = result["failure"]["message"]
    assert f"authentication failed ({status})" in message
    assert "'openai/one'" in message and "OPENAI_API_KEY" in message
    for noise in ("Traceback", "InternalServerError", "LiteLLM Retried", 'File "'):
        assert noise not in message and noise not in err


# ---- issue 9, item 18: every call counts against the run's budgets --------------------------------

RETRIED = """\
machine retried {
    model "openai/scorer"
    limits {
        tokens LIMIT
    }

    type Score {
        score: int
    }

    agent scorer {
        prompt "You score."
    }

    start state score {
        agent scorer
        do "Score it."
        output Score
        retries 10
        when "the score is fair" -> done
        otherwise -> done
    }

    final state done
}
"""


@pytest.mark.parametrize("who", ["agent", "verifier"])
def test_reasked_replies_count_against_the_token_limit(server: FakeOpenAIServer, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], who: str) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "retried.fsm"
    spec.write_text(RETRIED.replace("LIMIT", "100"), encoding="utf-8")
    if who == "verifier":
        server.enqueue(Reply(text='{"score": 5}', prompt_tokens=11, completion_tokens=7))
    bad = '{"score": "high"}' if who == "agent" else '{"choice": "maybe", "reason": "", "feedback": ""}'
    server.enqueue(*[Reply(text=bad, prompt_tokens=11, completion_tokens=7) for _ in range(11)])
    code, result, _ = statewright_run(capsys, str(spec), "--retries", "0")

    assert code == 1 and result is not None
    assert (result["failure"]["kind"], result["failure"]["limit"]) == ("limit", "tokens")
    made = len(server.requests)
    assert made < 11  # the limit, not the retries, ended it
    assert result["usage"]["llm_calls"] == made and result["usage"]["prompt_tokens"] == 11 * made


def test_replies_thrown_away_by_the_client_count_in_the_runs_usage(server: FakeOpenAIServer, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from support.fake_openai_server import NoChoices

    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "one.fsm"
    spec.write_text(ONE_CALL, encoding="utf-8")
    server.enqueue(NoChoices(), Reply(text="a reply", prompt_tokens=11, completion_tokens=7))
    code, result, _ = statewright_run(capsys, str(spec), "--retries", "1", "--retry-delay", "0")
    assert code == 0 and result is not None
    assert (result["usage"]["prompt_tokens"], result["usage"]["completion_tokens"]) == (22, 14)
    server.enqueue(NoChoices(), NoChoices())
    code, result, _ = statewright_run(capsys, str(spec), "--retries", "1", "--retry-delay", "0")
    assert code == 1 and result is not None and result["failure"]["kind"] == "model"
    assert (result["usage"]["prompt_tokens"], result["usage"]["completion_tokens"]) == (22, 14)
