"""The trace: JSONL events for every step and decision, content only on request, secrets never."""

from __future__ import annotations

import json
import os

import pytest
from pydantic import BaseModel
from support.fake_client import FakeClient, verdict
from support.machines import cond, final, go, machine, otherwise, state, stay, when

from statewright.runtime.client import ModelError
from statewright.runtime.engine import Engine
from statewright.runtime.spec import InputSpec, LimitsSpec
from statewright.runtime.trace import Trace, read_trace
from statewright.trace_show import render_trace


class Score(BaseModel):
    score: int


def review_machine(limits: LimitsSpec | None = None):
    return machine(
        state("draft", go("review"), tell=["critic"], do="Write about {{ topic }}."),
        state("review", when(lambda s: s.output.score >= 80, "publish", "output.score >= 80"),
              cond("the draft is off topic", "draft", max=1), stay("review", max=1), otherwise("publish"),
              agent="critic", output=Score),
        final("publish", "{{ draft.output }}"),
        inputs=[InputSpec("topic", str)],
        limits=limits,
    )


ANSWERS = {
    ("agent", "draft"): ["a piece on cats", "a piece on FSMs"],
    ("agent", "review"): ['{"score": 10}', '{"score": 50}', '{"score": 85}'],
    ("verifier", "review"): [verdict("the draft is off topic", "It is about cats.", "Write about FSMs.")],
}


def traced_run(tmp_path, content=False, answers=ANSWERS, limits=None):
    path = tmp_path / "run.jsonl"
    trace = Trace(str(path), content=content)
    result = Engine(review_machine(limits), client=FakeClient(answers), trace=trace).run({"topic": "FSMs"})
    trace.close()
    return result, read_trace(str(path)), path


def test_a_run_writes_one_json_event_per_line_in_order(tmp_path):
    result, events, path = traced_run(tmp_path)
    assert result.ok
    lines = path.read_text().splitlines()
    assert len(lines) == len(events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all({"event", "seq", "time"} <= set(e) for e in events)
    assert events[0]["event"] == "run_start" and events[0]["inputs"] == {"topic": "FSMs"}
    assert events[-1]["event"] == "run_end"
    assert events[-1]["status"] == "final" and events[-1]["final_state"] == "publish"
    assert events[-1]["usage"]["llm_calls"] == 6


def test_every_transition_is_traced_with_its_cause(tmp_path):
    _, events, _ = traced_run(tmp_path)
    moves = [(e["from"], e["to"], e["cause"]) for e in events if e["event"] == "transition"]
    assert moves == [
        ("draft", "review", "unconditional"),
        ("review", "draft", "verifier"),
        ("draft", "review", "unconditional"),
        ("review", "review", "stay"),
        ("review", "publish", "guard"),
    ]
    verifier_move = [e for e in events if e["event"] == "transition"][1]
    assert verifier_move["reason"] == "It is about cats."


def test_guards_state_visits_calls_and_skips_are_traced(tmp_path):
    _, events, _ = traced_run(tmp_path)
    kinds = {e["event"] for e in events}
    assert {"state_enter", "state_exit", "llm_call", "guard", "verdict", "bound_skip"} <= kinds
    guards = [(e["state"], e["index"], e["text"], e["value"]) for e in events if e["event"] == "guard"]
    assert guards[0] == ("review", 0, "output.score >= 80", False)
    assert guards[-1] == ("review", 0, "output.score >= 80", True)
    enters = [(e["state"], e["visit"]) for e in events if e["event"] == "state_enter"]
    assert enters[:4] == [("draft", 1), ("review", 1), ("draft", 2), ("review", 2)]
    call = next(e for e in events if e["event"] == "llm_call" and e["role"] == "verifier")
    assert {"role", "state", "model", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms",
            "attempts"} <= set(call)
    assert call["model"] == "fake/verifier"
    skips = [(e["to"], e["bound"]) for e in events if e["event"] == "bound_skip"]
    assert ("draft", "max 1") in skips


def test_limit_and_bound_failures_are_transitions_with_those_causes(tmp_path):
    _, events, _ = traced_run(tmp_path, limits=LimitsSpec(steps=2))
    last = [e for e in events if e["event"] == "transition"][-1]
    assert (last["from"], last["to"], last["cause"]) == ("draft", None, "limit")
    end = events[-1]
    assert end["status"] == "failed" and end["failure"]["limit"] == "steps"


def test_without_content_no_message_reply_or_output_is_written(tmp_path):
    _, events, path = traced_run(tmp_path)
    calls = [e for e in events if e["event"] == "llm_call"]
    assert all("messages" not in e and "reply" not in e for e in calls)
    assert "a piece on cats" not in path.read_text()


def test_with_content_messages_and_replies_are_written(tmp_path):
    _, events, _ = traced_run(tmp_path, content=True)
    first = next(e for e in events if e["event"] == "llm_call")
    assert first["messages"][-1] == {"role": "user", "content": "Write about FSMs."}
    assert first["reply"] == {"content": "a piece on cats"}


def test_api_keys_and_secret_environment_values_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890-abcdef")
    answers = dict(ANSWERS)
    answers[("agent", "draft")] = ["use sk-proj-ABCDEFGHIJKLMNOPQRSTUV and tok-1234567890-abcdef",
                                   "Authorization: Bearer abcdef.ghijkl.mnopqr"]
    _, _, path = traced_run(tmp_path, content=True, answers=answers)
    text = path.read_text()
    assert "sk-proj-ABCDEFGHIJKLMNOPQRSTUV" not in text
    assert "tok-1234567890-abcdef" not in text
    assert "abcdef.ghijkl.mnopqr" not in text
    assert "[REDACTED]" in text


def test_a_failed_model_call_is_traced_with_the_clients_events(tmp_path):
    error = ModelError("fake/model", "HTTP 500", attempts=3)
    error.events = [{"type": "retry", "attempt": 1}]  # type: ignore[attr-defined]
    events: list[dict] = []
    spec = machine(state("a", go("done")), final("done"))
    Engine(spec, client=FakeClient({("agent", "a"): [error]}), trace=Trace(sink=events)).run({})
    failed = next(e for e in events if e["event"] == "llm_error")
    assert (failed["state"], failed["attempts"], failed["events"]) == ("a", 3, [{"type": "retry", "attempt": 1}])


def test_render_trace_shows_the_timeline_and_totals_per_state_and_agent(tmp_path):
    _, _, path = traced_run(tmp_path)
    text = render_trace(str(path))
    assert "run " in text and "machine m" in text
    assert "-> review  (unconditional)" in text
    assert "-> draft  (verifier: It is about cats.)" in text
    assert "-> review  (stay" in text
    assert "guard    #0 `output.score >= 80` -> true" in text
    assert "end: final state publish" in text
    state_table = text.split("\n\nstate")[1]
    review_row = next(line for line in state_table.splitlines() if line.startswith("review"))
    assert review_row.split()[1:3] == ["3", "4"]  # 3 visits, 4 calls (3 agent + 1 verifier)
    agent_table = text.split("\n\nagent")[1]
    assert any(line.startswith("verifier") and line.split()[1] == "1" for line in agent_table.splitlines())
    assert any(line.startswith("critic") and line.split()[1] == "3" for line in agent_table.splitlines())


def test_render_trace_shows_repairs_and_reasks(tmp_path):
    path = tmp_path / "trace.jsonl"
    spec = machine(state("review", go("done"), output=Score), final("done"))
    client = FakeClient({("agent", "review"): ["no JSON here", '```json\n{"score": "85"}\n```']})
    trace = Trace(str(path))
    assert Engine(spec, client=client, trace=trace).run({}).ok
    trace.close()
    text = render_trace(str(path))
    assert "re-asked agent: reply 1 was not usable: the reply holds no JSON value" in text
    assert "repaired agent reply: fence, coerced" in text


def test_a_verifier_answer_sent_back_is_a_reask_of_role_verifier():
    spec = machine(state("judge", cond("the text is done", "done"), otherwise("done")), final("done"))
    client = FakeClient({("agent", "judge"): ["text"],
                         ("verifier", "judge"): ['{"choice": "maybe"}', verdict("the text is done", "ok", "")]})
    events: list[dict] = []
    assert Engine(spec, client=client, trace=Trace(sink=events)).run({}).ok
    [reask] = [e for e in events if e["event"] == "reask"]
    assert (reask["state"], reask["role"], reask["attempt"]) == ("judge", "verifier", 1)
    assert "choice must be the number of the first condition that holds (1 to 1)" in reask["error"]


def test_render_trace_rejects_a_file_that_is_not_a_trace(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n")
    with pytest.raises(ValueError, match="trace event"):
        render_trace(str(other))


def test_a_trace_line_cut_short_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps({"event": "run_start", "seq": 1, "run_id": "x", "machine": "m"}) + '\n{"event": "st')
    assert [e["event"] for e in read_trace(str(path))] == ["run_start"]


def test_otherwise_cause_is_traced():
    events: list[dict] = []
    spec = machine(state("a", when(lambda s: False, "x", "false"), otherwise("y")), final("x"), final("y"))
    Engine(spec, client=FakeClient({("agent", "a"): ["out"]}), trace=Trace(sink=events)).run({})
    assert [e["cause"] for e in events if e["event"] == "transition"] == ["otherwise"]


def test_trace_rendering_stays_out_of_the_runtime_that_runners_carry():
    """`trace show` is the statewright command's: a runner writes and reads traces, and shows none."""
    from statewright.compiler.codegen.runtime_source import installed_runtime_index

    runtime = installed_runtime_index()
    assert "read_trace" in runtime.names
    assert "render_trace" not in runtime.names
    assert not [name for name in runtime.names if "Timeline" in name or name.endswith("Totals")]


@pytest.mark.parametrize("prefix", __import__("statewright.runtime.trace", fromlist=["x"])._KEY_PREFIXES)
def test_every_key_shape_is_found_by_the_quick_test_before_its_pattern(prefix):
    """The written-out test for a key's prefix knows every prefix a key shape starts with: a key written
    into a record is redacted, in a short text and inside a long one."""
    from statewright.runtime.trace import _KEY_SHAPES, _may_hold_a_key, redacted_json

    rest = {"AKIA": "ABCDEFGHIJKLMNOP", "Bearer": " abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
            "xox": "b-abcdefghijklmnopqrstuvwxyz"}
    key = prefix + rest.get(prefix, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF")
    assert _KEY_SHAPES.search(key), key  # a key of that shape
    for text in (key, "through high " * 50 + key + " sigh"):
        assert _may_hold_a_key(text)
        assert key not in redacted_json({"reply": text}, [])
    assert not _may_hold_a_key("through the high thoughts of night")


def test_a_trace_write_that_fails_is_raised_once_and_closing_does_not_raise_it_again():
    # A full disk: the write of a line raises (the run stops and says why); close() flushed the same line
    # again and raised too, and from the runner's `finally` that turned the run's error into an internal one.
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    trace = Trace("/dev/full")
    with pytest.raises(OSError):
        trace.emit("run_start", machine="m")
    trace.close()
    trace.close()  # closed once; a second close is nothing


def test_a_run_whose_trace_cannot_be_written_fails_with_its_own_error_not_an_internal_one(tmp_path, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    from statewright.cli import main as cli_main

    spec = tmp_path / "echo.fsm"
    spec.write_text('machine echo {\n    model "openai/m"\n    agent w { prompt "p" }\n'
                    '    start state s { agent w do "Say hi." -> done }\n    final state done\n}\n', encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"s": ["hi"]}}), encoding="utf-8")
    code = cli_main(["run", str(spec), "--script", str(script), "--trace", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "error: the run stopped: OSError: [Errno 28] No space left on device" in err
    assert "internal error" not in err
