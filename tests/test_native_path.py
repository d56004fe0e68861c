"""Runs that never import litellm: `statewright run`, `statewright batch`, a generated runner and a Temporal
worker's activities, whose models all take the native path, make their real HTTP calls to a local server
and end with `litellm` nowhere in `sys.modules`; forcing litellm (`--model-client litellm`) imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import compile_runner
from support.fake_openai_server import FakeOpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
SPEC = """\
machine notes {
    input topic: str
    model "openai/writer-model"

    type Score {
        score: int
    }

    agent writer {
        prompt "You write notes."
    }

    agent critic {
        prompt "You score notes."
        model "groq/critic-model"
        fallbacks ["openai/backup-model"]
    }

    start state draft {
        agent writer
        do "Write notes about {{ topic }}."
        -> review
    }

    state review {
        agent critic
        do "Score the notes."
        output Score
        when "the notes are good" -> done
        otherwise -> done
    }

    final state done {
        result "{{ draft.output }} / {{ review.output.score }}"
    }
}
"""
# Runs `statewright ARGS` in this process and prints its exit status and whether litellm was imported.
IN_PROCESS_CLI = """
import json, sys
from statewright.cli import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "litellm": "litellm" in sys.modules}), file=sys.stderr)
"""
# Loads a generated runner as a module, runs its command line, and says whether litellm was imported.
IN_PROCESS_RUNNER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("notes_runner", sys.argv[1])
module = sys.modules["notes_runner"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
status = module.main(module.MACHINE, sys.argv[2:])
print(json.dumps({"status": status, "litellm": "litellm" in sys.modules}), file=sys.stderr)
"""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(default=Reply(text="unused")) as running:
        yield running


def environment(server: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("OPENAI_", "GROQ_"))}
    env.pop("STATEWRIGHT_MODEL_CLIENT", None)
    env.update({"OPENAI_API_BASE": server.url + "/v1", "OPENAI_API_KEY": "sk-test-native-0000",
                "GROQ_API_BASE": server.url + "/groq/v1", "GROQ_API_KEY": "gsk-test-native-0000",
                "PYTHONPATH": str(ROOT / "src"), **extra})
    return env


def script_replies(server: FakeOpenAIServer, runs: int = 1) -> None:
    for _ in range(runs):
        server.enqueue(Reply(text="Notes on FSMs."), model="writer-model")
        server.enqueue(Reply(json={"score": 81}), model="critic-model")
        server.enqueue(Reply(json={"choice": "the notes are good", "reason": "", "feedback": ""}),
                       model="writer-model")


def python(code: str, *args: str, env: dict[str, str], cwd: Path) -> tuple[dict[str, Any], str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report, done.stdout


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "notes.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


def test_statewright_run_of_openai_compatible_models_never_imports_litellm(server, spec, tmp_path):
    script_replies(server)

    report, out = python(IN_PROCESS_CLI, "run", str(spec), "--input", "topic=FSMs", "--quiet",
                         env=environment(server), cwd=tmp_path)

    assert report == {"status": 0, "litellm": False}
    assert json.loads(out)["result"] == "Notes on FSMs. / 81"
    assert {r.path for r in server.requests} == {"/v1/chat/completions", "/groq/v1/chat/completions"}
    assert len(server.requests) == 3  # the writer, the critic (groq), the verifier: all real HTTP calls


def test_a_generated_runner_never_imports_litellm(server, spec, tmp_path):
    runner = compile_runner(spec, tmp_path / "notes_runner.py")
    script_replies(server)

    report, out = python(IN_PROCESS_RUNNER, str(runner), "--input", "topic=FSMs", "--quiet",
                         env=environment(server), cwd=tmp_path)

    assert report == {"status": 0, "litellm": False}
    assert json.loads(out)["result"] == "Notes on FSMs. / 81"


def test_statewright_batch_never_imports_litellm(server, spec, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{n}", "inputs": {"topic": "FSMs"}}) + "\n" for n in range(3)))
    script_replies(server, runs=3)

    # one case at a time: the writer and the verifier draw their replies from one queue of the server
    report, _ = python(IN_PROCESS_CLI, "batch", str(spec), "--inputs", str(cases), "--out", str(tmp_path / "out.jsonl"),
                       "--concurrency", "1", "--quiet", env=environment(server), cwd=tmp_path)

    assert report == {"status": 0, "litellm": False}
    results = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["status"] for r in results] == ["final"] * 3


# litellm's groq route does not take the fake server's replies: forced through litellm, the critic calls
# its model over the OpenAI route, which every OpenAI-compatible server serves
TO_OPENAI = ("--model-map", "groq/critic-model=openai/critic-model")


@pytest.mark.slow
def test_forcing_litellm_sends_the_same_calls_through_it(server, spec, tmp_path):
    script_replies(server)

    report, out = python(IN_PROCESS_CLI, "run", str(spec), "--input", "topic=FSMs", "--quiet",
                         "--model-client", "litellm", *TO_OPENAI, env=environment(server), cwd=tmp_path)

    assert report == {"status": 0, "litellm": True}
    assert json.loads(out)["result"] == "Notes on FSMs. / 81"


@pytest.mark.slow
def test_the_variable_forces_litellm_and_a_value_it_does_not_know_is_a_usage_error(server, spec, tmp_path):
    script_replies(server)
    report, _ = python(IN_PROCESS_CLI, "run", str(spec), "--input", "topic=FSMs", "--quiet", *TO_OPENAI,
                       env=environment(server, STATEWRIGHT_MODEL_CLIENT="litellm"), cwd=tmp_path)
    assert report == {"status": 0, "litellm": True}

    done = subprocess.run([sys.executable, "-m", "statewright", "run", str(spec), "--input", "topic=FSMs"],
                          capture_output=True, text=True, env=environment(server, STATEWRIGHT_MODEL_CLIENT="fast"),
                          cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 2
    assert "STATEWRIGHT_MODEL_CLIENT must be auto or litellm, not 'fast'" in done.stderr
    assert "Traceback" not in done.stderr


# A Temporal worker's activities, as the worker performs them (without a cluster: the SDK only carries them).
WORKER_ACTIVITIES = """
import asyncio, json, sys
from statewright import api
from statewright.runtime.temporal import TemporalMachines, request_to_json
from statewright.runtime.temporal_activities import TemporalActivities
from statewright.runtime.client import ModelRequest
machine = api.runtime_machine(api.check_file(sys.argv[1]))
activities = TemporalActivities(TemporalMachines([machine]))
request = ModelRequest(role="agent", state="draft", model="openai/writer-model",
                       messages=[{"role": "user", "content": "Write."}], fallbacks=("groq/critic-model",))
payload = {"request": request_to_json(request), "heartbeat": 0}
async def work():
    await activities.ready(payload)
    return await activities.call_model(payload), activities.estimate(payload)
answer, estimate = asyncio.run(work())
print(json.dumps({"content": answer["response"]["content"], "estimate": estimate,
                  "litellm": "litellm" in sys.modules}), file=sys.stderr)
"""


def test_a_temporal_workers_model_calls_never_import_litellm(server, spec, tmp_path):
    pytest.importorskip("temporalio")
    server.enqueue(Reply(text="from the worker"), model="writer-model")

    report, _ = python(WORKER_ACTIVITIES, str(spec), env=environment(server), cwd=tmp_path)

    assert report["content"] == "from the worker" and report["litellm"] is False
    assert report["estimate"][0] > 0


@pytest.mark.slow
def test_a_runner_of_openai_compatible_models_runs_with_only_pydantic_and_jinja2_installed(server, spec, tmp_path):
    from support.bare_python import make_minimal_python

    python = make_minimal_python(tmp_path / "venv")
    runner = compile_runner(spec, tmp_path / "notes_runner.py")
    script_replies(server)
    env = environment(server)
    env.pop("PYTHONPATH")

    done = subprocess.run([str(python), str(runner), "--input", "topic=FSMs", "--quiet"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, check=False)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "Notes on FSMs. / 81"
    forced = subprocess.run([str(python), str(runner), "--input", "topic=FSMs", "--model-client", "litellm"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert forced.returncode == 1, forced.stderr  # a typed failure, naming what to install
    failure = json.loads(forced.stdout)["failure"]
    assert failure["kind"] == "model" and "litellm, which cannot be imported here" in failure["message"]
    assert "install litellm" in failure["message"]
