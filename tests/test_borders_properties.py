"""Hostile values through every border and every face: a typed outcome, no traceback, nothing lost, no secret.

Hypothesis draws hostile values — JSON nested deep (to 100,000 levels), wide, large, with lone surrogates,
invalid UTF-8, terminal escapes, and a secret in every encoding — and drives them through each border: a
model reply, a tool's result, a person's answer, a run's input, a batch case line. Each face runs them: the
interpreter (the Python API, `statewright run` and `statewright test`), a generated runner, `batch`, and
Temporal. Whatever the value, the run ends in an outcome of the border's kind (or goes on, when the value
fits), nothing it wrote is unreadable (every trace line an event, every checkpoint loadable, every case a
result line), no process prints a traceback, no sink shows a raw control character, and the environment's
key is in no sink in any of its forms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.e2e_runs import cli, compile_runner

import statewright
from statewright.compiler.views.source_text import double_quoted
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.progress import Progress
from statewright.runtime.result import AnswerError
from statewright.runtime.scripted import Script, ScriptedClient
from statewright.runtime.trace import sink_json, trace_lines

KEY_NAME = "BORDER_SERVICE_API_KEY"
KEY = "bk-" + "".join(chr(c) for c in range(0x21, 0x7F))  # every printable ASCII character but the space
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x9b\u202e\u2028\x7f\x00"
GOOD = '{"approved": true, "note": "fine"}'

SPEC = textwrap.dedent("""\
    machine hostile {
        input amount: int
        input kind: str = "plain"
        input tags: list[str] = []

        type Decision {
            approved: bool
            note: str
        }

        tool probe = "border_probe:probe"

        agent clerk {
            prompt "You handle refunds."
        }

        start state fetch {
            call probe(kind = kind)
            -> check
        }

        state check {
            agent clerk
            do "Check {{ amount }}: {{ fetch.output }}."
            output Decision
            -> approve
        }

        state approve {
            ask "Refund {{ amount }}? {{ check.output.note }}"
            output Decision
            when output.approved -> pay
            otherwise -> refuse
        }

        final state pay {
            result "paid {{ amount }}: {{ approve.output.note }}"
        }

        final state refuse
    }
""")

PROBE = f'''
KEY = {KEY!r}
ESCAPES = {ESCAPES!r}


def probe(kind: str):
    """A value of the kind asked for: what a hostile tool returns."""
    if kind.startswith("deep:"):
        value = "x"
        for _ in range(int(kind[5:])):
            value = [value]
        return value
    if kind == "cycle":
        value = []
        value.append(value)
        return value
    if kind.startswith("wide:"):
        return {{f"k{{n}}": n for n in range(int(kind[5:]))}}
    if kind.startswith("big:"):
        return "x" * int(kind[4:])
    if kind == "surrogate":
        return {{"text": "\\ud800 lone \\udfff"}}
    if kind == "escapes":
        return {{ESCAPES: ESCAPES}}
    if kind == "key":
        import json, urllib.parse
        return [KEY, json.dumps(KEY), urllib.parse.quote(KEY, safe=""), urllib.parse.quote_plus(KEY), repr(KEY)]
    return "plain"
'''


def key_forms() -> list[str]:
    """The environment key in every encoding a sink could show it in (worked out here, not by the runtime)."""
    forms = {KEY, urllib.parse.quote(KEY, safe=""), urllib.parse.quote(KEY), urllib.parse.quote_plus(KEY),
             repr(KEY)[1:-1]}
    return sorted(forms | {json.dumps(form, ensure_ascii=a)[1:-1] for form in forms for a in (True, False)})


def raw_controls(text: str) -> list[str]:
    return [ch for ch in text if (ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0
            or ch in "\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]


def no_traceback(text: str) -> None:
    for sign in ("Traceback", "internal error", "RecursionError", "maximum recursion depth"):
        assert sign not in text, text[-2000:]


def no_key(sinks: dict[str, str | bytes]) -> None:
    found = [(name, form) for name, text in sinks.items() for form in key_forms()
             if (form.encode("utf-8", "surrogatepass") if isinstance(text, bytes) else form) in text]
    assert found == []


# ---- hostile values ----------------------------------------------------------------------------------------

levels = st.sampled_from([1, 50, 99, 100, 101, 150, 600, 3_000, 100_000])


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    n = draw(levels)
    shape = draw(st.sampled_from(["list", "object", "unclosed", "in a field", "in prose"]))
    if shape == "list":
        return "[" * n + "]" * n
    if shape == "object":
        return '{"a": ' * n + "1" + "}" * n
    if shape == "unclosed":
        return "[" * n
    if shape == "in a field":
        return '{"approved": true, "note": ' + "[" * n + "]" * n + "}"
    return "Here is my answer: " + "[" * n + "]" * n + " " + GOOD


def json_with(note: str) -> str:
    return json.dumps({"approved": True, "note": note})


hostile_texts = st.one_of(
    deep_json(),
    st.integers(1, 30_000).map(lambda n: json.dumps({f"k{i}": i for i in range(n)})),  # wide
    st.integers(1, 3_000_000).map(lambda n: json_with("x" * n)),  # large, under the limits: kept whole
    st.just(json_with(ESCAPES)),
    st.just('{"approved": true, "note": "\\ud800 lone"}'),
    st.sampled_from(key_forms()).map(json_with),
    st.integers(1, 200_000).map(lambda n: "x [" * n + GOOD),  # prose of brackets before the value
    st.text(max_size=200),
    st.just(GOOD),
)

hostile_values: st.SearchStrategy[Any] = st.one_of(
    levels.map(lambda n: _nested(n)),
    st.integers(1, 30_000).map(lambda n: {f"k{i}": i for i in range(n)}),
    st.integers(1, 3_000_000).map(lambda n: "x" * n),
    st.just({"approved": "\ud800", "note": "\udfff"}),
    st.just({"approved": True, "note": ESCAPES}),
    st.just({"approved": "yes", "note": 5}),
    st.sampled_from(key_forms()).map(lambda form: {"approved": False, "note": form}),
    hostile_texts,
)


def _nested(n: int) -> Any:
    value: Any = "x"
    for _ in range(n):
        value = [value]
    return value


tool_kinds = st.one_of(levels.map(lambda n: f"deep:{n}"), st.just("cycle"), st.just("surrogate"),
                       st.just("escapes"), st.just("key"), st.integers(1, 30_000).map(lambda n: f"wide:{n}"),
                       st.integers(1, 3_000_000).map(lambda n: f"big:{n}"), st.just("plain"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "border_probe.py").write_text(PROBE, encoding="utf-8")
    (root / "hostile.fsm").write_text(SPEC, encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_NAME, KEY)
    monkeypatch.setenv("PYTHONPATH", str(project))
    monkeypatch.syspath_prepend(str(project))


# ---- the interpreter, in process: every border, many examples ------------------------------------------------


def _sinks_of_a_run(folder: Path, result: Any, progress: str) -> dict[str, str | bytes]:
    """The run's sinks, after checking that each still reads: every trace line an event, the checkpoint."""
    for number, event, why in trace_lines(str(folder / "trace.jsonl")):
        assert event is not None, (number, why)
    store = CheckpointStore(str(folder / "runs.db"))
    try:
        saved = store.load("r")
    finally:
        store.close()
    refused_inputs = result.failure is not None and result.failure.kind == "input"
    assert (saved is None) == refused_inputs  # a run refused its inputs saves nothing; any other loads
    stdout = sink_json(result.to_json(), indent=2)
    assert raw_controls(stdout) == [] and raw_controls(progress) == []
    files = {str(path): path.read_bytes() for path in folder.iterdir() if path.is_file()}
    return {"stdout": stdout, "progress": progress, **files}


def _interpreter_run(folder: Path, inputs: dict[str, Any], replies: list[str]
                     ) -> tuple[Any, str, Any, ScriptedClient]:
    import io

    folder.mkdir()
    machine = statewright.load(folder.parent / "hostile.fsm")
    stream = io.StringIO()
    client = ScriptedClient(Script.from_json({"agent": {"check": replies}}))
    result = machine.run(inputs, client=client, trace=str(folder / "trace.jsonl"), trace_content=True,
                         checkpoint=str(folder / "runs.db"), run_id="r", workspace=str(folder / "ws"),
                         listeners=[Progress(stream, color=False)])
    return result, stream.getvalue(), machine, client


_examples = iter(range(10**9))


@given(border=st.sampled_from(["reply", "tool", "answer", "input"]), text=hostile_texts, value=hostile_values,
       kind=tool_kinds, persistent=st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_the_interpreter_ends_every_hostile_value_in_its_typed_outcome(
        project: Path, border: str, text: str, value: Any, kind: str, persistent: bool) -> None:
    folder = project / f"api-{next(_examples)}"
    inputs: dict[str, Any] = {"amount": 3, "kind": kind if border == "tool" else "plain"}
    if border == "input":
        inputs["tags"] = value
    replies = ([text] * 3 if persistent else [text, GOOD]) if border == "reply" else [GOOD]
    result, progress, machine, client = _interpreter_run(folder, inputs, replies)
    if border == "answer" and result.status == "waiting":
        try:
            result = machine.resume("r", value, checkpoint=str(folder / "runs.db"), trace=str(folder / "trace.jsonl"),
                                    trace_content=True)
        except AnswerError as refused:
            assert str(refused)  # refused, saying why: the run keeps waiting
            still = machine.resume("r", checkpoint=str(folder / "runs.db"))
            assert still.status == "waiting"
    expected = {"reply": "output", "tool": "tool", "answer": None, "input": "input"}[border]
    if result.failure is not None:
        assert result.failure.kind == expected, (border, result.failure)
    else:
        assert result.status in ("waiting", "final")
    no_key({**_sinks_of_a_run(folder, result, progress), "messages to the model": json.dumps(client.received)})


# ---- the command-line faces: statewright run, a generated runner, statewright test, batch ---------------------


def _face_checks(done: subprocess.CompletedProcess[str], folder: Path) -> None:
    no_traceback(done.stdout + done.stderr)
    assert raw_controls(done.stderr) == [] and raw_controls(done.stdout) == []
    files = {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.suffix not in (".py", ".fsm")
             and p.name not in ("script.json", "cases.jsonl")}  # what the test wrote is no sink
    no_key({"stdout": done.stdout, "stderr": done.stderr, **files})


@pytest.mark.slow
@given(text=hostile_texts, kind=tool_kinds, runner=st.booleans())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_statewright_run_and_a_runner_end_every_hostile_value_in_its_typed_outcome(
        project: Path, text: str, kind: str, runner: bool) -> None:
    folder = project / f"cli-{next(_examples)}"
    folder.mkdir()
    script = folder / "script.json"
    script.write_text(json.dumps({"agent": {"check": [text, GOOD, GOOD]}}), encoding="utf-8")
    args = ["--input", "amount=3", "--input", f"kind={kind}", "--script", str(script), "--trace",
            str(folder / "t.jsonl"), "--trace-content", "--checkpoint", str(folder / "runs.db"), "--run-id", "r"]
    if runner:
        program = project / "hostile_runner.py"
        if not program.exists():
            compile_runner(project / "hostile.fsm", program)
        done = subprocess.run([sys.executable, str(program), *args], capture_output=True, text=True, cwd=folder,
                              timeout=300, check=False)
    else:
        done = cli("run", str(project / "hostile.fsm"), *args, cwd=folder, timeout=300)
    _face_checks(done, folder)
    assert done.returncode in (1, 4), done.stderr
    outcome = json.loads(done.stdout)
    if outcome["status"] == "failed":
        assert outcome["failure"]["kind"] in ("tool", "output")
    shown = cli("trace", "show", str(folder / "t.jsonl"))
    assert shown.returncode == 0 and "is unreadable" not in shown.stdout
    _face_checks(shown, folder)
    # a command line cannot carry a NUL (the operating system ends an argument there): the answer without them
    answer = cli("resume", "r", "--checkpoint", str(folder / "runs.db"), "--answer",
                 text[:100_000].replace("\0", ""), cwd=folder)
    _face_checks(answer, folder)
    assert answer.returncode in (0, 1, 2, 4)


TESTED = textwrap.dedent("""\
    machine told {
        agent a {
            prompt "p"
        }
        start state s {
            agent a
            do "Say it."
            -> done
        }
        final state done {
            result "{{ s.output }}"
        }
        test NAME {
            reply s REPLY
            expect result EXPECTED
        }
    }
""")


@pytest.mark.slow
@given(name=st.text(min_size=1, max_size=40), reply=hostile_texts, expected=st.text(max_size=40))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_statewright_test_reports_every_hostile_reply_and_name_escaped(
        project: Path, name: str, reply: str, expected: str) -> None:
    folder = project / f"test-{next(_examples)}"
    folder.mkdir()
    try:
        source = TESTED.replace("NAME", double_quoted(name)).replace("REPLY", double_quoted(reply)).replace(
            "EXPECTED", double_quoted(expected))
        (folder / "told.fsm").write_text(source, encoding="utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate cannot be written into a source file at all
    done = cli("test", str(folder / "told.fsm"), cwd=folder, timeout=300)
    _face_checks(done, folder)
    assert done.returncode in (0, 1), done.stdout + done.stderr


hostile_lines = st.one_of(
    hostile_texts.map(lambda text: json.dumps({"inputs": {"amount": 1, "tags": [text]}}).encode()),
    deep_json().map(lambda text: ('{"inputs": {"amount": 1, "tags": ' + text + "}}").encode()),
    st.just(b'{"inputs": {"amount": 1, "tags": ["\xff\xfe invalid utf-8"]}}'),
    st.just(b'{"inputs": {"amount": 1, "tags": ["\\ud800"]}}'),
    st.just(json.dumps({"id": ESCAPES, "inputs": {"amount": 2}}).encode()),
    st.just(json.dumps({"inputs": {"amount": 1, "tags": [KEY]}}).encode()),
    st.binary(max_size=50).filter(lambda data: b"\n" not in data and b"\r" not in data),
)


@pytest.mark.slow
@given(lines=st.lists(hostile_lines, min_size=1, max_size=6), text=hostile_texts)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_a_batch_settles_every_hostile_case_line_and_finishes(project: Path, lines: list[bytes], text: str) -> None:
    folder = project / f"batch-{next(_examples)}"
    folder.mkdir()
    cases = folder / "cases.jsonl"
    cases.write_bytes(b"\n".join([json.dumps({"id": "first", "inputs": {"amount": 1}}).encode(), *lines]) + b"\n")
    script = folder / "script.json"
    script.write_text(json.dumps({"agent": {"check": [text, GOOD, GOOD]}}), encoding="utf-8")
    out = folder / "out.jsonl"
    done = cli("batch", str(project / "hostile.fsm"), "--inputs", str(cases), "--script", str(script), "--out", str(out),
               "--trace", str(folder / "traces"), "--trace-content", cwd=folder, timeout=300)
    _face_checks(done, folder)
    assert done.returncode in (0, 1, 4), done.stderr
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    with_text = [n for n, raw in enumerate(cases.read_bytes().split(b"\n"), 1) if raw.strip(b" \t\r\n")]
    assert sorted(line["line"] for line in written) == with_text  # every case line settled: nothing lost
    for line in written:
        assert line["status"] in ("waiting", "failed", "invalid")
        if line["status"] == "failed":
            assert line["failure"]["kind"] in ("input", "output", "tool")
    again = cli("batch", str(project / "hostile.fsm"), "--inputs", str(cases), "--script", str(script), "--out",
                str(out), "--resume", cwd=folder, timeout=300)
    _face_checks(again, folder)
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(written)


# ---- Temporal ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_temporal_ends_hostile_replies_and_answers_in_their_typed_outcomes(project: Path) -> None:
    pytest.importorskip("temporalio")
    from support.temporal_server import DevServer, temporal_cli

    if temporal_cli() is None:
        pytest.skip("no `temporal` program (statewright[temporal])")
    import asyncio

    from statewright import api
    from statewright.runtime.temporal import TemporalRunner, temporal_answer, temporal_result, temporal_status

    machine = api.runtime_machine(api.check_path(project / "hostile.fsm"))
    examples = [("[" * 600 + "]" * 600, '{"approved": true, "note": ' + "[" * 3000 + "]" * 3000 + "}"),
                (json_with(ESCAPES), '{"approved": "yes", "note": 5}'),
                ("x [" * 50_000 + GOOD, "[" * 50_000),
                (json_with(urllib.parse.quote(KEY, safe="")), json.dumps({"approved": True, "note": KEY}))]
    with DevServer() as temporal:
        worker = subprocess.Popen([sys.executable, "-m", "statewright", "worker", str(project / "hostile.fsm"),
                                   "--temporal", temporal.address, "--task-queue", "hostile"], cwd=project,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert worker.stdout is not None
            while "serving" not in (line := worker.stdout.readline()):
                assert line, "the worker did not start"
            for number, (reply, answer) in enumerate(examples):
                runner = TemporalRunner(machine, temporal.address, task_queue="hostile",
                                        script=Script.from_json({"agent": {"check": [reply, GOOD, GOOD]}}))

                async def go(number: int = number, runner: TemporalRunner = runner, answer: str = answer) -> Any:
                    handle = await runner.start({"amount": 3}, run_id=f"hostile-{number}")
                    for _ in range(200):
                        status = await temporal_status(temporal.address, f"hostile-{number}")
                        if status.get("status") != "running":
                            break
                        await asyncio.sleep(0.1)
                    if status.get("status") != "waiting":
                        return await temporal_result(handle), None, status
                    refused = await temporal_answer(temporal.address, f"hostile-{number}", answer)
                    after = await temporal_status(temporal.address, f"hostile-{number}")
                    return None, refused, after

                result, refused, status = asyncio.run(go())
                if result is not None:  # the reply was refused: the run failed with kind output
                    assert result.failure is not None and result.failure.kind == "output"
                else:  # the answer is refused (the run keeps waiting) or taken
                    assert refused is None or status["status"] == "waiting", (refused, status)
                no_key({"result": json.dumps(result.to_json()) if result else "", "status": json.dumps(status),
                        "refused": refused or ""})
        finally:
            worker.terminate()
            output = worker.communicate(timeout=30)[0]
    no_traceback(output)
