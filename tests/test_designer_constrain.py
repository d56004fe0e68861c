"""`statewright design --constrain`: drafts held to the grammar at decoding time, where the server takes one.

The grammar travels as llama.cpp's `grammar` request field (checked over real HTTP against the local fake
OpenAI-compatible server); the repair loop is the same, and still handles syntax errors from a server that
ignores the grammar (the scripted provider ignores it); a draft cut off by the token limit is finished.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_openai_server import FakeOpenAIServer, Reply
from support.scripted_litellm import register_scripted_provider
from test_designer import AGENTS, GOOD, TASK

from statewright import api
from statewright.cli import main
from statewright.designer.constraint import GRAMMAR_MODELS_ENV, choose_constraint
from statewright.grammar import parse_text
from statewright.grammar.decoding import export_constraint
from statewright.runtime.scripted import Script

MODEL = "scripted/designer"


def scripted(machine: str, repairs: list[str]) -> Script:
    script = Script.from_json({"designer": {"agents": [AGENTS], "machine": [machine], "repair": repairs}})
    register_scripted_provider(script)
    return script


def events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---- which drafts are constrained ------------------------------------------------------------------


def test_auto_constrains_models_whose_server_takes_a_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GRAMMAR_MODELS_ENV, raising=False)
    assert choose_constraint("auto", "llamafile/smollm2").mode == "grammar"
    assert choose_constraint("auto", "openai/gpt-4o-mini").mode == "none"
    assert "STATEWRIGHT_GRAMMAR_MODELS" in choose_constraint("auto", "openai/gpt-4o-mini").reason
    assert choose_constraint("grammar", "openai/gpt-4o-mini").mode == "grammar"
    assert choose_constraint("none", "llamafile/smollm2").mode == "none"


def test_the_list_of_grammar_servers_is_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GRAMMAR_MODELS_ENV, "openai/smollm2, hosted_vllm/")
    assert choose_constraint("auto", "openai/smollm2-135m").mode == "grammar"
    assert choose_constraint("auto", "llamafile/smollm2").mode == "none"
    assert choose_constraint("auto", "openai/x", prefixes=["openai/"]).mode == "grammar"


def test_an_unknown_constrain_mode_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["design", TASK, "-o", str(tmp_path / "m.fsm"), "--constrain", "always"]) == 2
    outcome = api.design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, constrain="always")
    assert not outcome.ok and "constrain must be one of auto, grammar, none" in outcome.log[0]


# ---- the grammar on the wire -----------------------------------------------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        monkeypatch.setenv("OPENAI_API_BASE", running.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy-0000")
        monkeypatch.setenv(GRAMMAR_MODELS_ENV, "openai/local-")
        yield running


def test_constrained_drafts_send_the_gbnf_in_the_grammar_field(
        server: FakeOpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(json=AGENTS), Reply(text=GOOD))
    trace = tmp_path / "design.jsonl"
    code = main(["design", TASK, "-o", str(tmp_path / "m.fsm"), "--model", "openai/local-smollm2",
                 "--max-tokens", "700", "--trace", str(trace)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "drafting under the grammar constraint: the model's server takes a grammar (prefix 'openai/local-')" in err
    agents, machine = (r.body or {} for r in server.requests)
    assert machine["grammar"] == export_constraint("gbnf", draft=True)
    assert "grammar" not in agents  # the agents come as JSON, under their JSON schema
    assert agents["max_tokens"] == machine["max_tokens"] == 700
    recorded = events(trace)
    start = next(e for e in recorded if e["event"] == "designer_start")
    reason = "the model's server takes a grammar (prefix 'openai/local-')"
    assert (start["constraint"], start["constraint_reason"]) == ("grammar", reason)
    calls = {e["state"]: e for e in recorded if e["event"] == "llm_call"}
    assert calls["machine"]["constraint"] == "grammar" and "constraint" not in calls["agents"]


def test_unconstrained_drafts_send_no_grammar(server: FakeOpenAIServer, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    server.enqueue(Reply(json=AGENTS), Reply(text=f"```fsm\n{GOOD}```"))
    trace = tmp_path / "design.jsonl"
    assert main(["design", TASK, "-o", str(tmp_path / "m.fsm"), "--model", "openai/local-smollm2",
                 "--constrain", "none", "--trace", str(trace)]) == 0
    assert all("grammar" not in (r.body or {}) for r in server.requests)
    start = next(e for e in events(trace) if e["event"] == "designer_start")
    assert (start["constraint"], start["constraint_reason"]) == ("none", "asked for")
    assert "grammar constraint" not in capsys.readouterr().err


# ---- the repair loop, unchanged --------------------------------------------------------------------


def test_syntax_errors_from_a_server_that_ignores_the_grammar_are_repaired(tmp_path: Path) -> None:
    # the scripted provider takes no grammar: its first draft has a syntax error, as a free-text draft can
    broken = GOOD.replace("-> revise max 2", "=> revise max 2")
    assert [d.code for d in parse_text(broken).diagnostics] == ["SW1014"]
    scripted(f"```fsm\n{broken}```", [GOOD])
    trace = tmp_path / "design.jsonl"
    outcome = api.design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, constrain="grammar",
                         trace_path=str(trace))
    assert outcome.ok, outcome.log
    assert [a.errors[0]["code"] if a.errors else None for a in outcome.attempts] == ["SW1014", None]
    feedback = next(e for e in events(trace) if e["event"] == "designer_feedback")
    assert "SW1014" in str(feedback["message"]) and "without a code fence" in str(feedback["message"])


def test_a_constrained_draft_cut_off_by_the_token_limit_is_finished(tmp_path: Path) -> None:
    cut = GOOD[: GOOD.index("when output.approved")] + "when output.appro"
    scripted(cut, [])
    trace = tmp_path / "design.jsonl"
    outcome = api.design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, constrain="grammar",
                         max_repairs=0, trace_path=str(trace))
    attempt = outcome.attempts[0]
    assert attempt.source.startswith(cut) and not parse_text(attempt.source).diagnostics
    assert not any(d["code"].startswith("SW1") for d in attempt.diagnostics)  # only meaning is left
    assert any("the reply stopped before the machine was complete" in line for line in outcome.log)
    recorded = next(e for e in events(trace) if e["event"] == "designer_attempt")
    assert recorded["completed"]["dropped"] == ""  # type: ignore[index]
    assert recorded["completed"]["added"].split() == ["->", "x", "}", "}"]  # type: ignore[index]


def test_a_draft_is_one_machine_and_is_finished_wherever_it_stops() -> None:
    """The draft grammar begins at the machine (no `use` of other files before it), so every constrained
    draft is the beginning of a machine, and one cut off inside a field's description is finished."""
    from statewright.designer.design import draft_source

    gbnf = export_constraint("gbnf", draft=True)
    assert gbnf.splitlines()[4] == 'root ::= machine "\\n"?' and "use-decl" not in gbnf
    assert "use-decl" in export_constraint("gbnf")  # a file written by hand may use others
    cut = 'machine source {\n  type T {\n    kind: str "for (type, value) in sys::map<int'
    text, finished = draft_source(cut, constrained=True)
    assert finished is not None and text.startswith(cut[: cut.index('"')])  # the cut string is dropped
    assert parse_text(text).machine is not None and not parse_text(text).diagnostics


def test_an_unconstrained_draft_cut_off_is_left_to_the_repair_loop(tmp_path: Path) -> None:
    scripted(GOOD[:400], [])
    outcome = api.design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, constrain="none", max_repairs=0)
    assert [d["code"] for d in outcome.attempts[0].errors] == ["SW1003"]


@pytest.mark.parametrize("case", sorted(p.parent.name for p in (Path(__file__).parent / "cases" / "valid").glob(
    "*/input.fsm")))
def test_a_draft_cut_off_anywhere_in_a_valid_case_is_finished_into_a_machine_that_parses(case: str) -> None:
    """Every construct, `len: int` (a field named like a constraint) included: wherever a token limit cuts the
    draft — after a word or inside one, the draft ending in the newline the designer adds — the finisher
    closes it into text the parser reads."""
    import re

    from statewright.grammar import parse_text
    from statewright.grammar.decoding.completion import complete_draft

    text = (Path(__file__).parent / "cases" / "valid" / case / "input.fsm").read_text(encoding="utf-8")
    start = re.search(r"^machine ", text, re.MULTILINE).start()  # type: ignore[union-attr]
    words = [m for m in re.finditer(r"\S+", text) if m.start() >= start]
    # after a word, and inside one (half a keyword: `fi` of `final`), as a token limit cuts
    cuts = sorted({m.end() for m in words} | {m.end() - 1 for m in words if len(m.group()) > 2})
    unfinished = []
    for cut in cuts[::3]:
        prefix = text[start:cut] + "\n"
        finished = complete_draft(prefix)
        source = finished.text if finished is not None else prefix
        if any(d.code.startswith("SW1") for d in parse_text(source).diagnostics):
            unfinished.append(prefix[-50:])
    assert unfinished == []
