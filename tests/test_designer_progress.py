"""What `statewright design` prints while it works, through the CLI: each attempt as it happens, and from the
second on what it fixed of the attempt before (`3 errors -> 1 error (fixed ...; new ...; still ...)`,
`1 test problem -> 0`) — with a scripted designer, and with a designer model behind a local
OpenAI-compatible server reached as litellm's `openai/` provider reaches any such server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_openai_server import FakeOpenAIServer, Reply, Slow
from test_designer import AGENTS, GOOD, TASK, fenced

from statewright.cli import main

UNKNOWN_STATE = GOOD.replace("when output.approved -> send", "when output.approved -> sned")  # SW2002
WRONG_TYPE = GOOD.replace('when output.category == "other" -> escalate',
                          'when output.category == 3 -> escalate')  # SW4001
BOTH = UNKNOWN_STATE.replace('when output.category == "other" -> escalate', 'when output.category == 3 -> escalate')
TEST_FAILS = GOOD.replace("expect path [triage, draft, review, send]", "expect path [triage, review, send]")
ATTEMPTS = [BOTH, WRONG_TYPE.replace("-> revise max 2", "-> revise"), TEST_FAILS, GOOD]
EXPECTED = [
    "attempt 1: 2 errors (SW2002, SW4001)",
    # the repair dropped the bound of the review loop: two new errors, one old one left
    "attempt 2: 2 errors -> 3 errors (fixed SW2002; new SW3007, SW3008; still SW4001)",
    "attempt 3: 3 errors -> 0 errors (fixed SW3007, SW3008, SW4001); 1 test problem",
    "attempt 4: 1 test problem -> 0: the machine checks and its tests pass",
]


def script_file(tmp_path: Path, drafts: list[str]) -> Path:
    path = tmp_path / "designer.json"
    path.write_text(json.dumps({"designer": {"agents": [AGENTS], "machine": [fenced(drafts[0])],
                                             "repair": [fenced(d) for d in drafts[1:]]}}), encoding="utf-8")
    return path


def test_each_attempt_says_what_it_fixed_brought_in_and_still_has(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "support.fsm"
    assert main(["design", TASK, "-o", str(out), "--script", str(script_file(tmp_path, ATTEMPTS)), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "designer proposed 2 agent(s): support, reviewer", *EXPECTED, f"wrote {out} after 4 attempt(s)"]


def test_without_quiet_each_attempt_is_shown_as_it_happens_between_the_calls(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "support.fsm"
    assert main(["design", TASK, "-o", str(out), "--model", "scripted/designer",
                 "--script", str(script_file(tmp_path, ATTEMPTS))]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"designing {out} with scripted/designer"
    shown = [line for line in lines if line.startswith("attempt ")]
    assert shown == EXPECTED  # each once: the log at the end leaves out what was shown
    calls = [i for i, line in enumerate(lines) if line.startswith("  calling designer (repair)")]
    attempts = [lines.index(line) for line in EXPECTED]
    assert len(calls) == 3 and attempts[0] < calls[0] < attempts[1] < calls[1] < attempts[2] < calls[2] < attempts[3]
    assert lines[-1] == f"wrote {out} after 4 attempt(s)"


def test_a_design_that_runs_out_of_repairs_says_what_is_left(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "support.fsm"
    script = script_file(tmp_path, [BOTH, UNKNOWN_STATE])
    assert main(["design", TASK, "-o", str(out), "--script", str(script), "--max-repairs", "1", "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1:3] == ["attempt 1: 2 errors (SW2002, SW4001)",
                        "attempt 2: 2 errors -> 1 error (fixed SW4001; still SW2002)"]
    assert not out.exists()


@pytest.fixture
def local_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """An OpenAI-compatible server on 127.0.0.1, found the way docs/designer.md says: OPENAI_API_BASE."""
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_BASE", running.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        yield running


def test_a_designer_behind_a_local_openai_compatible_server_shows_the_same_progress(
        local_server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local_server.enqueue(Reply(json=AGENTS), Reply(text=fenced(BOTH)), Reply(text=fenced(TEST_FAILS)),
                         Reply(text=fenced(GOOD)))
    out = tmp_path / "support.fsm"
    code = main(["design", TASK, "-o", str(out), "--model", "openai/smollm2-135m", "--constrain", "none"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("attempt ")] == [
        "attempt 1: 2 errors (SW2002, SW4001)",
        "attempt 2: 2 errors -> 0 errors (fixed SW2002, SW4001); 1 test problem",
        "attempt 3: 1 test problem -> 0: the machine checks and its tests pass"]
    assert "  calling designer (machine) (openai/smollm2-135m)" in err.splitlines()
    assert [r.model for r in local_server.requests] == ["smollm2-135m"] * 4
    assert "# Designer model: openai/smollm2-135m" in out.read_text(encoding="utf-8")


def test_a_small_context_model_reads_the_compact_reference(local_server: FakeOpenAIServer, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from statewright.stdlib.reference import compact_designer_system_prompt, designer_system_prompt

    local_server.enqueue(Reply(json=AGENTS), Reply(text=fenced(GOOD)), Reply(json=AGENTS), Reply(text=fenced(GOOD)))
    for reference, out in (("compact", "small.fsm"), ("full", "full.fsm")):
        code = main(["design", TASK, "-o", str(tmp_path / out), "--model", "openai/smollm2-135m", "--quiet",
                     "--reference", reference])
        assert code == 0, capsys.readouterr().err
    systems = [(r.body or {})["messages"][0]["content"] for r in local_server.requests]
    compact, full = compact_designer_system_prompt(), designer_system_prompt()
    # the agents' call carries its JSON schema's instructions after the reference
    assert [s.startswith(want) for s, want in zip(systems, (compact, compact, full, full), strict=True)] == [True] * 4
    assert (systems[1], systems[3]) == (compact, full)
    assert len(compact) * 4 < len(full)


def test_a_slow_local_model_gets_the_seconds_timeout_gives_each_call(
        local_server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local_server.enqueue(Slow(2.0, then=Reply(json=AGENTS)))
    code = main(["design", TASK, "-o", str(tmp_path / "a.fsm"), "--model", "openai/smollm2-135m", "--quiet",
                 "--timeout", "0.5"])
    assert code == 1 and "no reply within the 0.5 s" in capsys.readouterr().err
    local_server.enqueue(Slow(2.0, then=Reply(json=AGENTS)), Reply(text=fenced(GOOD)))
    code = main(["design", TASK, "-o", str(tmp_path / "b.fsm"), "--model", "openai/smollm2-135m", "--quiet",
                 "--timeout", "30"])
    assert code == 0, capsys.readouterr().err
    for wrong in ("0", "-1", "inf", "soon"):
        assert main(["design", TASK, "-o", str(tmp_path / "c.fsm"), "--timeout", wrong]) == 2
    assert "expected" in capsys.readouterr().err
