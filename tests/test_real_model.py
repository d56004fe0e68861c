"""End to end against a real small model: SmolLM2-135M served by llama.cpp on 127.0.0.1.

The model cannot reason, but it makes machines run through litellm's real HTTP path with typed outputs and
verifier answers constrained by JSON schema. These tests skip when no server is configured; CI starts one
(`bash .ci/start-model-server`) and sets STATEWRIGHT_REQUIRE_REAL_MODEL=1 so they fail instead of skipping.
Skip them locally with `-m "not realmodel"`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from statewright import api

pytestmark = pytest.mark.realmodel
ROOT = Path(__file__).parent.parent
LOCAL_MODEL = "openai/smollm2-135m"


@pytest.fixture(scope="module")
def server_url() -> str:
    url = os.environ.get("STATEWRIGHT_LLAMA_URL")
    if not url:
        if os.environ.get("STATEWRIGHT_REQUIRE_REAL_MODEL"):
            pytest.fail("STATEWRIGHT_REQUIRE_REAL_MODEL is set but STATEWRIGHT_LLAMA_URL is not")
        pytest.skip("no local model server (start one with `bash .ci/start-model-server`)")
    return url


def _model_map(path: Path) -> list[str]:
    machine = api.check_file(path).ir
    models = {machine.model, machine.verifier_model}
    for agent in machine.agents:
        models.add(agent.model)
        models.update(agent.fallbacks)
    args = []
    for model in sorted(models):
        args += ["--model-map", f"{model}={LOCAL_MODEL}"]
    return args


def schema_constrained_calls(path: Path, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls for a typed output or a verifier answer; each must have sent its JSON schema."""
    machine: Any = api.runtime_machine(api.check_file(path))
    typed = {name for name, state in machine.states.items() if state.output is not None}
    constrained = [c for c in calls if c["role"] == "verifier" or c["state"] in typed]
    for call in constrained:
        modes = {e["mode"] for e in call.get("events", []) if e.get("type") == "structured_output"}
        assert modes and modes <= {"json_schema", "json_object"}, call
    return constrained


@pytest.mark.parametrize(
    ("example", "inputs", "asks_the_verifier"),
    [
        # typed outputs (Signals, Critique) routed by guards
        ("content_pipeline.fsm", {"topic": "finite-state machines"}, False),
        # a typed list, then a story judged by the verifier: its path always reaches the verifier
        ("trivia_writing.fsm", {"theme": "the solar system"}, True),
    ],
)
def test_an_example_runs_end_to_end_against_a_real_model(example: str, inputs: dict[str, str],
                                                          asks_the_verifier: bool, server_url: str,
                                                          tmp_path: Path) -> None:
    path = ROOT / "examples" / example
    machine = api.check_file(path).ir
    given = {i.name: inputs.get(i.name, "a short example") for i in machine.inputs if not i.has_default}
    trace = tmp_path / "trace.jsonl"
    argv = [sys.executable, "-m", "statewright", "run", str(path), "--trace", str(trace), "--max-tokens", "160",
            "--workspace", str(tmp_path / "ws"), *_model_map(path)]
    for key, value in given.items():
        argv += ["--input", f"{key}={value}"]
    env = dict(os.environ, OPENAI_API_BASE=server_url, OPENAI_BASE_URL=server_url,
               OPENAI_API_KEY="sk-local-test-key", LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    if result["status"] == "final":
        assert result["final_state"] in {s.name for s in machine.states if s.kind == "final"}
    else:
        # a small model may loop until a bound or limit stops it, or keep writing JSON that --max-tokens
        # cuts off until its retries are spent: each must end as a typed failure, never a crash
        assert result["failure"]["kind"] in ("limit", "bound", "output"), result["failure"]
        if result["failure"]["kind"] == "output":
            assert "attempt(s)" in result["failure"]["message"], result["failure"]

    events = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [e for e in events if e["event"] == "llm_call"]
    assert calls, "no model call was traced"
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in calls)  # real counts from the server
    constrained = schema_constrained_calls(path, calls)
    assert any(c["role"] == "agent" for c in constrained), "no typed output was asked for"
    if asks_the_verifier:
        assert any(c["role"] == "verifier" for c in constrained), "the verifier was never asked"
    transitions = [e for e in events if e["event"] == "transition"]
    assert transitions and all(t["cause"] for t in transitions)
    assert "sk-local-test-key" not in trace.read_text()


VARIANT_SPEC = """\
machine helpdesk {
    input question: str len 1..200

    type Answer {
        text: str len 1..60
    }

    type Escalation {
        reason: str len 1..60
        code: str matches "^[A-Z]{3}$"
    }

    agent helper {
        prompt "You answer support questions in a few words."
    }

    start state answer {
        agent helper
        do "Answer this question, or escalate it: {{ question }}"
        output Answer | Escalation
        when output is Answer and len(output.text) > 0 -> done
        when output is Escalation -> escalated
        otherwise -> done
    }

    final state done {
        result "{% if answer.output is Answer %}{{ answer.output.text }}{% endif %}"
    }

    final state escalated {
        result "{% if answer.output is Escalation %}{{ answer.output.code }}{% endif %}"
    }
}
"""


def test_a_variant_output_with_constraints_runs_against_a_real_model(server_url: str, tmp_path: Path) -> None:
    """llama.cpp turns the variant schema (a root object, one object per variant, lengths and a pattern)
    into its grammar, so what the model writes names a variant and keeps the constraints that grammar can
    hold; what it cannot hold, validation does."""
    path = tmp_path / "helpdesk.fsm"
    path.write_text(VARIANT_SPEC, encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    argv = [sys.executable, "-m", "statewright", "run", str(path), "--trace", str(trace), "--max-tokens", "120",
            "--input", "question=How do I reset my password?", *_model_map(path)]
    env = dict(os.environ, OPENAI_API_BASE=server_url, OPENAI_BASE_URL=server_url,
               OPENAI_API_KEY="sk-local-test-key", LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [e for e in events if e["event"] == "llm_call" and e["state"] == "answer"]
    assert calls and schema_constrained_calls(path, calls)
    if result["status"] == "final":
        [exit_event] = [e for e in events if e["event"] == "state_exit" and e["state"] == "answer"]
        assert exit_event["variant"] in ("Answer", "Escalation")
        assert result["final_state"] == {"Answer": "done", "Escalation": "escalated"}[exit_event["variant"]]
    else:
        # the grammar holds the shape; a reply it lets through but validation refuses ends typed
        assert result["failure"]["kind"] == "output", result["failure"]
