"""Model replies end to end: `statewright run` over the real litellm HTTP path against a local
OpenAI-compatible server — JSON a small model writes with raw line breaks is read (and the repair traced),
broken JSON is sent back with where it breaks, failures name the spec's own types, the verifier's choice is
an exact number, and the feedback that reaches an agent is never cut out of the middle of its words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import read_events
from support.fake_openai_server import FakeOpenAIServer, Reply

from statewright import cli


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeOpenAIServer]:
    monkeypatch.chdir(tmp_path)  # the default workspace goes under the current directory
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_BASE", running.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
        yield running


def statewright_run(capsys: pytest.CaptureFixture[str], spec: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(["run", str(spec), "--retries", "0", "--retry-delay", "0", "--quiet", *args])
    return code, json.loads(capsys.readouterr().out)


def last_user_text(server: FakeOpenAIServer, index: int) -> str:
    body = server.requests[index].body
    assert body is not None
    return str(body["messages"][-1]["content"])


VERDICTS = """\
machine grading {
    model "openai/grader"

    type Verdict {
        verdict: "pass" | "fail"
        note: str
    }

    agent grader {
        prompt "You grade answers."
    }

    start state grade {
        agent grader
        do "Grade the answer."
        output Verdict
        retries 1
        when "the note explains the grade" -> done
        otherwise -> unclear
    }

    final state done {
        result "{{ grade.output.note }}"
    }

    final state unclear
}
"""


def test_a_literal_newline_inside_a_json_string_is_read_and_traced_as_a_repair(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "grading.fsm"
    spec.write_text(VERDICTS, encoding="utf-8")
    # what small models write: the line breaks and the tab raw, inside the strings
    server.enqueue(Reply(text='{"verdict": "pass", "note": "line one\nline two\tend"}'),
                   Reply(text='{"choice": 1, "reason": "It says why\non two lines.", "feedback": ""}'))
    trace = tmp_path / "trace.jsonl"
    code, result = statewright_run(capsys, spec, "--trace", str(trace))

    assert code == 0, result
    assert result["result"] == "line one\nline two\tend"
    assert len(server.requests) == 2  # read at once: nothing was sent back
    events = read_events(trace)
    repairs = [(e["role"], e["repairs"]) for e in events if e["event"] == "repair"]
    assert repairs == [("agent", ["control_characters"]), ("verifier", ["control_characters"])]
    assert not [e for e in events if e["event"] == "reask"]


def test_broken_json_is_sent_back_with_where_it_breaks_and_the_failure_names_the_specs_type(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "grading.fsm"
    spec.write_text(VERDICTS, encoding="utf-8")
    broken = '{"verdict": "pass" "note": "a comma is missing"}'
    server.enqueue(Reply(text=broken), Reply(text=broken))
    code, result = statewright_run(capsys, spec)

    assert code == 1 and result["failure"]["kind"] == "output"
    told = last_user_text(server, 1)
    assert "Expecting ',' delimiter at line 1, column 20" in told
    assert "holds no JSON value" not in told
    message = result["failure"]["message"]
    assert "did not match type Verdict after 2 attempt(s)" in message
    assert "VerdictType" not in message and "VerdictType" not in json.dumps(server.requests[0].body)


def test_a_reply_without_any_json_is_told_so(server: FakeOpenAIServer, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "grading.fsm"
    spec.write_text(VERDICTS, encoding="utf-8")
    server.enqueue(Reply(text="I think it passes."), Reply(text='{"verdict": "pass", "note": "n"}'),
                   Reply(text='{"choice": 0, "reason": "no", "feedback": ""}'))
    code, result = statewright_run(capsys, spec)
    assert code == 0 and result["final_state"] == "unclear"
    assert "the reply holds no JSON value" in last_user_text(server, 1)


# ---- issue 9, item 13: the verifier's choice is an exact reference to one condition -------------------

NEAR_TWINS = """\
machine review {
    model "openai/writer"

    agent writer {
        prompt "You write."
    }

    start state draft {
        agent writer
        do "Write the draft."
        when "The draft is good." -> publish
        when "the draft is good" -> polish
        when "None" -> nothing
        otherwise -> failed
    }

    final state publish
    final state polish
    final state nothing
    final state failed
}
"""


@pytest.mark.parametrize(("answer", "final"), [
    (2, "polish"), (1, "publish"), (3, "nothing"), (0, "failed"),
    ('"the draft is good"', "polish"),  # a condition's exact text still names it, and only it
    ('"None"', "nothing"),  # the condition spelled None fires
    ('"none"', "failed"),
], ids=["two", "one", "three", "zero", "exact-text", "None-condition", "none"])
def test_the_verifiers_choice_is_exact_so_near_duplicates_and_a_condition_named_none_fire_their_own_edge(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: object,
        final: str) -> None:
    spec = tmp_path / "review.fsm"
    spec.write_text(NEAR_TWINS, encoding="utf-8")
    server.enqueue(Reply(text="A draft."), Reply(text=f'{{"choice": {answer}, "reason": "r", "feedback": ""}}'))
    code, result = statewright_run(capsys, spec)

    assert code == 0 and result["final_state"] == final
    verifier = server.requests[1].body
    assert verifier is not None
    assert verifier["response_format"]["schema"]["properties"]["choice"]["enum"] == [0, 1, 2, 3]
    listed = verifier["messages"][-1]["content"]
    assert "1. The draft is good.\n2. the draft is good\n3. None\n" in listed


def test_a_choice_that_matches_a_condition_only_loosely_is_sent_back(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "review.fsm"
    spec.write_text(NEAR_TWINS, encoding="utf-8")
    server.enqueue(Reply(text="A draft."),
                   Reply(text='{"choice": "THE DRAFT IS GOOD", "reason": "r", "feedback": ""}'),
                   Reply(text='{"choice": 7, "reason": "r", "feedback": ""}'),
                   Reply(text='{"choice": 1, "reason": "r", "feedback": ""}'))
    trace = tmp_path / "trace.jsonl"
    code, result = statewright_run(capsys, spec, "--trace", str(trace))

    assert code == 0 and result["final_state"] == "publish"
    errors = [e["error"] for e in read_events(trace) if e["event"] == "reask"]
    expected = "choice must be the number of the first condition that holds (1 to 3), or 0 when none of them holds"
    assert errors == [expected] * 2


# ---- issue 9, item 14: feedback reaches the agent whole ----------------------------------------------

SHORT_CONDITION = """\
machine tokens {
    model "openai/writer"

    agent writer {
        prompt "You write."
    }

    start state write {
        agent writer
        do "Write a sentence about tokens."
        -> check
    }

    state check {
        agent writer
        do "Check the sentence."
        when "ok" -> done
        when "it needs another pass" -> write max 1
        otherwise -> done
    }

    final state done {
        result "{{ write.output }}"
    }
}
"""


def test_feedback_keeps_every_word_and_loses_only_a_quoted_condition(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "tokens.fsm"
    spec.write_text(SHORT_CONDITION, encoding="utf-8")
    reason = "Look at the token count: it is not OK yet, It  Needs another\npass."
    feedback = "Take the broken token out, then it is ok."
    server.enqueue(Reply(text="Tokens are words."), Reply(text="Checked."),
                   Reply(text=json.dumps({"choice": 2, "reason": reason, "feedback": feedback})),
                   Reply(text="Tokens are pieces of words."), Reply(text="Checked again."),
                   Reply(text=json.dumps({"choice": 1, "reason": "It is.", "feedback": ""})))
    code, result = statewright_run(capsys, spec)

    assert code == 0 and result["result"] == "Tokens are pieces of words."
    told = last_user_text(server, 3)
    assert "Reason: Look at the token count: it is not (...) yet, (...)." in told
    assert "Feedback: Take the broken token out, then it is (...)." in told
    assert "Lo(...)" not in told and "t(...)en" not in told
