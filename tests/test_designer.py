"""`statewright design`: a task in, a checked, tested, formatted machine out — or an honest failure.

The designer model is the scripted litellm provider (`scripted/designer`), answering per stage: "agents",
"machine", then "repair" for each repair; it runs through litellm's real call path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.scripted_litellm import Served, register_scripted_provider

from statewright import api
from statewright.cli import main
from statewright.designer import design, extract_source
from statewright.runtime.scripted import Script
from statewright.runtime.trace import Trace
from statewright.stdlib.reference import designer_system_prompt, example_paths

ROOT = Path(__file__).parent.parent
MODEL = "scripted/designer"
TASK = "Answer customer support tickets: classify the ticket, draft a reply, have it reviewed, revise at " \
       "most twice, and escalate to a human when the ticket is out of scope."

AGENTS = {"agents": [
    {"name": "support", "prompt": "You are a patient support engineer.", "tools": []},
    {"name": "reviewer", "prompt": "You review support replies.", "tools": []},
]}

GOOD = """machine support_reply {
    description "Answer a support ticket: classify it, draft a reply, review it, revise at most twice."

    input ticket: str

    type Triage {
        category: "billing" | "bug" | "how_to" | "other"
        summary: str "the customer's problem in one sentence"
    }

    type Review {
        approved: bool
        problems: list[str] "what must change, one per item"
    }

    agent support {
        prompt "You are a patient support engineer."
    }

    agent reviewer {
        prompt "You review support replies for accuracy and tone."
    }

    start state triage {
        agent support
        do "Classify this ticket and summarise it: {{ ticket }}"
        output Triage
        when output.category == "other" -> escalate
        -> draft
    }

    state draft {
        agent support
        do "Write a reply. Problem: {{ triage.output.summary }}"
        tell [reviewer]
        -> review
    }

    state review {
        agent reviewer
        do "Review the latest reply to this ticket: {{ ticket }}"
        output Review
        when output.approved -> send
        -> revise max 2
        otherwise -> escalate
    }

    state revise {
        agent support
        do "Revise your reply to fix: {{ review.output.problems }}"
        tell [reviewer]
        -> review
    }

    final state send {
        result "{{ revise.output or draft.output }}"
    }

    final state escalate {
        result "Escalated: {{ triage.output.summary }}"
    }

    test "a how-to ticket is answered at once" {
        input {
            ticket "How do I export my data?"
        }
        reply triage {
            category "how_to"
            summary "wants to export data"
        }
        reply draft "Go to Settings, then Export."
        reply review {
            approved true
            problems []
        }
        expect path [triage, draft, review, send]
        expect result "Go to Settings, then Export."
    }
}
"""

# three different errors: an unknown state (SW2002), a cycle nothing bounds (SW3008), a type mismatch (SW4001)
THREE_ERRORS = GOOD.replace(
    "when output.approved -> send", 'when output.approved == "yes" -> sned'
).replace(
    "        tell [reviewer]\n        -> review\n    }\n\n    state review",
    '        tell [reviewer]\n        when "the ticket is unclear" -> triage\n'
    "        -> review\n    }\n\n    state review",
)


def fenced(source: str) -> str:
    return f"Here is the machine.\n\n```fsm\n{source}```\n"


def script_for(machine: str, repairs: list[str]) -> Served:
    """The designer's replies, served through litellm's real call path (the scripted provider)."""
    return register_scripted_provider(Script.from_json({"designer": {
        "agents": [AGENTS], "machine": [fenced(machine)], "repair": [fenced(r) for r in repairs],
    }}))


def stage_calls(script: Served, *stages: str) -> list[tuple[str, str, int]]:
    return [c for c in script.calls if c[0] == "designer" and c[1] in stages]


def test_the_broken_machine_has_exactly_the_three_errors() -> None:
    comp = api.check_text(THREE_ERRORS, "m.fsm")
    assert sorted({d.code for d in comp.diagnostics if d.severity.value == "error"}) == [
        "SW2002", "SW3008", "SW4001"]
    assert api.check_text(GOOD, "m.fsm").ok


# ---- (a) three errors, then a repair -------------------------------------------------------------


def test_design_repairs_three_errors_into_a_checked_formatted_tested_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "support.fsm"
    trace = tmp_path / "design.jsonl"
    script = script_for(THREE_ERRORS, [GOOD])
    code = main(["design", TASK, "-o", str(out), "--model", MODEL, "--max-repairs", "3",
                 "--trace", str(trace)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert stage_calls(script, "agents") == [("designer", "agents", 0)]
    assert stage_calls(script, "machine", "repair") == [("designer", "machine", 0), ("designer", "repair", 0)]
    assert "attempt 1: 3 errors (SW2002, SW3008, SW4001)" in err
    assert ("attempt 2: 3 errors -> 0 errors (fixed SW2002, SW3008, SW4001): the machine checks and its tests "
            "pass") in err
    assert f"wrote {out} after 2 attempt(s)" in err

    text = out.read_text()
    # the header names the task and the model
    assert text.startswith(
        "# Designed by statewright from this task description:\n#   Answer customer support")
    assert f"# Designer model: {MODEL}\n" in text
    # formatted (fmt --check passes), checks clean, and its test block passes
    assert main(["fmt", "--check", str(out)]) == 0
    assert main(["check", str(out)]) == 0
    assert main(["test", str(out)]) == 0
    assert "PASS  a how-to ticket is answered at once" in capsys.readouterr().out

    # the trace: every attempt and what was fed back, and each call made with role "designer"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    attempts = [e for e in events if e["event"] == "designer_attempt"]
    assert [(a["attempt"], a["ok"], a["codes"]) for a in attempts] == [
        (1, False, ["SW2002", "SW3008", "SW4001"]), (2, True, [])]
    feedback = [e for e in events if e["event"] == "designer_feedback"]
    assert len(feedback) == 1
    assert {d["code"] for d in feedback[0]["diagnostics"] if d["severity"] == "error"} == {
        "SW2002", "SW3008", "SW4001"}
    calls = [e for e in events if e["event"] == "llm_call"]
    assert [(c["role"], c["state"]) for c in calls] == [
        ("designer", "agents"), ("designer", "machine"), ("designer", "repair")]
    # and what the model received through litellm: the repair request names each code
    repair = next(r for r in script.received if r["state"] == "repair")
    request = repair["messages"][-1]["content"]
    for code in ("SW2002", "SW3008", "SW4001"):
        assert f'"code": "{code}"' in request


def test_the_repair_request_carries_each_diagnostic_with_code_position_message_and_help(
    tmp_path: Path,
) -> None:
    script_for(THREE_ERRORS, [GOOD])
    events: list[dict[str, object]] = []
    outcome = design(TASK, output=str(tmp_path / "support.fsm"), model=MODEL,
                     trace=Trace(content=True, sink=events))
    assert outcome.ok
    repair_call = next(e for e in events if e["event"] == "llm_call" and e["state"] == "repair")
    messages = repair_call["messages"]
    # what the model was sent: its own first attempt, then the compiler's diagnostics as JSON
    assert [m["role"] for m in messages][-2:] == ["assistant", "user"]
    assert messages[-2]["content"] == THREE_ERRORS
    feedback = messages[-1]["content"]
    sent = json.loads(feedback.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert sent["valid"] is False and sent["error_count"] == 3
    by_code = {d["code"]: d for d in sent["diagnostics"]}
    assert set(by_code) >= {"SW2002", "SW3008", "SW4001"}
    assert by_code["SW2002"]["message"] == "unknown state 'sned'"
    assert by_code["SW2002"]["help"] == "did you mean 'send'?"
    sned_line = THREE_ERRORS[: THREE_ERRORS.index("sned")].count("\n") + 1
    assert by_code["SW2002"]["range"]["start"]["line"] == sned_line
    assert "cycle with no bound: triage -> draft -> triage" in by_code["SW3008"]["message"]
    assert "bool" in by_code["SW4001"]["message"]
    # the first user message states the task and the agents of stage 1
    assert TASK in messages[1]["content"] and '"support"' in messages[1]["content"]


# ---- (b) a model that never fixes its error ------------------------------------------------------


@pytest.mark.parametrize("repairs", [0, 2])
def test_design_gives_up_after_n_repairs_and_keeps_the_last_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], repairs: int
) -> None:
    out = tmp_path / "support.fsm"
    stubborn = GOOD.replace("-> escalate\n        -> draft", "-> escalte\n        -> draft")
    script = script_for(stubborn, [stubborn] * 5)
    code = main(["design", TASK, "-o", str(out), "--model", MODEL, "--max-repairs", str(repairs)])
    err = capsys.readouterr().err
    assert code == 1
    assert len(stage_calls(script, "machine", "repair")) == repairs + 1
    assert not out.exists()
    last = Path(str(out) + ".last-attempt")
    diagnostics = Path(str(out) + ".diagnostics.json")
    assert last.read_text() == stubborn
    doc = json.loads(diagnostics.read_text())
    assert doc["valid"] is False
    assert [d["code"] for d in doc["diagnostics"] if d["severity"] == "error"] == ["SW2002"]
    assert f"design failed: the machine still has problems after {repairs} repair attempt(s)" in err
    assert f"the last attempt is in {last} and its diagnostics in {diagnostics}" in err


def test_the_api_reports_the_failure_in_its_outcome(tmp_path: Path) -> None:
    stubborn = GOOD.replace("-> escalate\n        -> draft", "-> escalte\n        -> draft")
    script_for(stubborn, [stubborn] * 3)
    outcome = api.design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, max_repairs=3)
    assert not outcome.ok
    assert len(outcome.attempts) == 4
    assert [a.ok for a in outcome.attempts] == [False] * 4
    assert outcome.last_attempt_path == str(tmp_path / "m.fsm") + ".last-attempt"
    assert outcome.diagnostics_path == str(tmp_path / "m.fsm") + ".diagnostics.json"


# ---- what else is fed back -----------------------------------------------------------------------


def test_a_failing_test_block_is_fed_back_and_repaired(tmp_path: Path) -> None:
    wrong_expectation = GOOD.replace("expect path [triage, draft, review, send]",
                                     "expect path [triage, review, send]")
    script_for(wrong_expectation, [GOOD])
    events: list[dict[str, object]] = []
    outcome = design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL, trace=Trace(sink=events))
    assert outcome.ok
    first = outcome.attempts[0]
    assert first.diagnostics == [] and len(first.test_failures) == 1
    assert "FAIL  a how-to ticket is answered at once" in first.test_failures[0]
    feedback = next(e for e in events if e["event"] == "designer_feedback")
    assert "the path differs from the expected path" in feedback["message"]


def test_a_machine_without_a_test_block_is_sent_back(tmp_path: Path) -> None:
    untested = GOOD[: GOOD.index("    test ")].rstrip() + "\n}\n"
    assert api.check_text(untested, "m.fsm").ok
    script = script_for(untested, [GOOD])
    outcome = design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL)
    assert outcome.ok and len(stage_calls(script, "repair")) == 1
    assert "no test block" in outcome.attempts[0].test_failures[0]


def test_an_unreachable_model_is_a_clear_failure_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    register_scripted_provider(Script.from_json({"designer": {}}))
    assert main(["design", TASK, "-o", str(tmp_path / "m.fsm"), "--model", MODEL]) == 1
    err = capsys.readouterr().err
    assert "error: the designer model failed" in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_model_that_fails_during_repairs_still_leaves_its_last_attempt(tmp_path: Path) -> None:
    script_for(THREE_ERRORS, [])
    outcome = design(TASK, output=str(tmp_path / "m.fsm"), model=MODEL)
    assert not outcome.ok
    assert Path(str(tmp_path / "m.fsm") + ".last-attempt").read_text() == THREE_ERRORS
    assert any("the designer model failed" in line for line in outcome.log)


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["--max-repairs", "-1"], 2, "expected zero or more, got -1"),
        (["-o", "/no/such/folder/m.fsm"], 1, "the folder '/no/such/folder' does not exist"),
    ],
)
def test_bad_arguments_are_reported_before_any_model_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], status: int, message: str
) -> None:
    script = script_for(GOOD, [])
    args = ["design", TASK, "-o", str(tmp_path / "m.fsm"), "--model", MODEL, *argv]
    assert main(args) == status
    assert message in capsys.readouterr().err
    assert script.calls == []


# ---- the file that is written --------------------------------------------------------------------


WITH_TWIN = GOOD.replace(
    '        when output.category == "other" -> escalate\n        -> draft\n',
    '        when output.category == "other" -> escalate\n'
    '        when output.category == "bug" -> draft_bug\n'
    "        -> draft\n",
).replace(
    "    state review {",
    "    state draft_bug {\n        agent support\n"
    "        do \"Write a reply. Problem: {{ triage.output.summary }}\"\n"
    "        tell [reviewer]\n        -> review\n    }\n\n    state review {",
)


def test_the_exact_passes_run_on_the_design_unless_turned_off(tmp_path: Path) -> None:
    # draft and draft_bug do the same thing in the same way; as long as they tell the reviewer under their
    # own names, or a template reads draft.output, the exact pass must leave them apart
    twin = WITH_TWIN.replace("        tell [reviewer]\n        -> review\n    }\n\n    state review",
                             "        -> review\n    }\n\n    state review")
    twin = twin.replace("    state draft {\n        agent support\n        do \"Write a reply. Problem: "
                        "{{ triage.output.summary }}\"\n        tell [reviewer]\n",
                        "    state draft {\n        agent support\n        do \"Write a reply. Problem: "
                        "{{ triage.output.summary }}\"\n")
    twin = twin.replace('result "{{ revise.output or draft.output }}"', 'result "sent"').replace(
        'expect result "Go to Settings, then Export."', 'expect result "sent"')
    assert api.check_text(twin, "m.fsm").ok
    script_for(twin, [])
    optimized = design(TASK, output=str(tmp_path / "a.fsm"), model=MODEL)
    assert optimized.ok
    assert "state draft_bug" not in optimized.source
    assert "merged state(s) 'draft_bug' into the equivalent state 'draft'" in optimized.log
    assert main(["test", str(tmp_path / "a.fsm")]) == 0

    script_for(twin, [])
    plain = design(TASK, output=str(tmp_path / "b.fsm"), model=MODEL, optimize=False)
    assert plain.ok and "state draft_bug" in plain.source

    script_for(WITH_TWIN, [])
    listened = design(TASK, output=str(tmp_path / "c.fsm"), model=MODEL)
    assert listened.ok and "state draft_bug" in listened.source


def test_the_exact_passes_keep_two_states_that_differ_only_in_their_model(tmp_path: Path) -> None:
    # draft_bug is draft on a cheaper model: merged, the bug path would call the dearer one (and the test
    # block scripting draft_bug would be rewritten to script draft)
    twin = WITH_TWIN.replace("        tell [reviewer]\n        -> review\n    }\n\n    state review",
                             '        model "openai/gpt-4o-mini"\n        -> review\n    }\n\n    state review')
    twin = twin.replace("    state draft {\n        agent support\n        do \"Write a reply. Problem: "
                        "{{ triage.output.summary }}\"\n        tell [reviewer]\n",
                        "    state draft {\n        agent support\n        model \"openai/gpt-4o\"\n"
                        "        do \"Write a reply. Problem: {{ triage.output.summary }}\"\n")
    twin = twin.replace('result "{{ revise.output or draft.output }}"', 'result "sent"').replace(
        'expect result "Go to Settings, then Export."', 'expect result "sent"')
    assert 'model "openai/gpt-4o-mini"' in twin and 'model "openai/gpt-4o"\n' in twin
    assert api.check_text(twin, "m.fsm").ok
    script_for(twin, [])
    outcome = design(TASK, output=str(tmp_path / "a.fsm"), model=MODEL)
    assert outcome.ok
    assert "state draft_bug" in outcome.source and "state draft " in outcome.source
    assert not any("merged" in line for line in outcome.log)
    machine = api.check_text(outcome.source, "a.fsm").ir
    assert machine is not None
    assert {s.name: s.model for s in machine.states if s.name.startswith("draft")} == {
        "draft": "openai/gpt-4o", "draft_bug": "openai/gpt-4o-mini"}


def test_a_multi_line_task_is_kept_line_by_line_in_the_header(tmp_path: Path) -> None:
    script_for(GOOD, [])
    outcome = design("Answer tickets.\n\nEscalate what is out of scope.", output=str(tmp_path / "m.fsm"),
                     model=MODEL)
    assert outcome.source.splitlines()[:5] == [
        "# Designed by statewright from this task description:",
        "#   Answer tickets.",
        "#",
        "#   Escalate what is out of scope.",
        f"# Designer model: {MODEL}",
    ]
    assert api.format_text(outcome.source, "m.fsm").text == outcome.source


# ---- pieces --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "```fsm\nmachine m {\n}\n```",
        "Sure! Here it is:\n```\nmachine m {\n}\n```\nIt has no states yet.",
        "```json\n{\"a\": 1}\n```\n```statewright\nmachine m {\n}\n```",
        "machine m {\n}",
        "```fsm\nmachine m {\n}\n",  # cut off before the closing fence
    ],
)
def test_the_source_is_found_in_the_reply(reply: str) -> None:
    assert extract_source(reply) == "machine m {\n}\n"


def test_the_designer_prompt_holds_the_grammar_and_every_example() -> None:
    prompt = designer_system_prompt()
    grammar = (ROOT / "src" / "statewright" / "grammar" / "statewright.lark").read_text()
    assert grammar.strip() in prompt
    assert len(example_paths()) == len(list((ROOT / "examples").glob("*.fsm"))) >= 5
    for path in example_paths():
        assert path.read_text().strip() in prompt


def test_the_examples_in_the_prompt_are_the_examples_themselves_not_copies() -> None:
    """The package reads the repository's examples/ (through the link stdlib/examples), so no copy can
    drift from them."""
    assert [p.resolve() for p in example_paths()] == sorted(p.resolve() for p in (ROOT / "examples").glob("*.fsm"))


def test_the_designed_machine_shown_in_the_docs_checks_passes_its_tests_and_is_canonical() -> None:
    import re

    page = (ROOT / "docs" / "designer.md").read_text(encoding="utf-8")
    machine = re.findall(r"```fsm\n(.*?)```", page, re.DOTALL)[0]
    assert machine.startswith("# Designed by statewright from this task description:\n")
    comp = api.check_text(machine, "bug_fix.fsm")
    assert comp.ok and comp.diagnostics == []
    outcomes = api.run_tests(comp)
    assert len(outcomes) == 3 and all(o.passed for o in outcomes)
    assert api.format_text(machine, "bug_fix.fsm").text == machine


def test_a_later_success_removes_what_an_earlier_failure_left(tmp_path: Path) -> None:
    out = tmp_path / "m.fsm"
    stubborn = GOOD.replace("-> escalate\n        -> draft", "-> escalte\n        -> draft")
    script_for(stubborn, [])
    assert not design(TASK, output=str(out), model=MODEL, max_repairs=0).ok
    assert Path(str(out) + ".last-attempt").exists()
    script_for(GOOD, [])
    outcome = design(TASK, output=str(out), model=MODEL)
    assert outcome.ok and out.exists()
    assert not Path(str(out) + ".last-attempt").exists()
    assert not Path(str(out) + ".diagnostics.json").exists()


def test_the_docs_try_the_designer_without_a_key_with_a_script_file(tmp_path: Path) -> None:
    """docs/designer.md shows a script and a `design --script` command: they run as shown, from a shell,
    and print the log the page shows."""
    import re
    import shlex

    from support.e2e_runs import cli

    page = (ROOT / "docs" / "designer.md").read_text(encoding="utf-8")
    section = page.split("\n## Trying it without a key\n", 1)[1].split("\n## ", 1)[0]
    script = re.findall(r"```json\n(.*?)```", section, re.DOTALL)[0]
    command, log = re.findall(r"```text\n(.*?)```", section, re.DOTALL)[:2]
    words = shlex.split(command)
    assert words[:2] == ["statewright", "design"]
    (tmp_path / words[words.index("--script") + 1]).write_text(script, encoding="utf-8")
    done = cli(*words[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stderr.splitlines()
    positions = [printed.index(line) for line in log.strip().splitlines()]  # each shown line, in order
    assert positions == sorted(positions)
    written = tmp_path / words[words.index("-o") + 1]
    comp = api.check_file(written)
    assert comp.ok and comp.diagnostics == []
    assert all(outcome.passed for outcome in api.run_tests(comp))


def _page_commands(block: str) -> list[list[str]]:
    """The commands in a ```text block: `$ `-prefixed lines (with their `\\` continuations), or the whole
    block when it holds one command; each split as a shell would."""
    import shlex

    text = block.replace("\\\n", "")  # a line continuation, as the shell reads it
    if text.lstrip().startswith("$ "):
        return [shlex.split(line[2:]) for line in text.splitlines() if line.startswith("$ ")]
    return [shlex.split(text)]


def _run_page_design(words: list[str], tmp_path: Path) -> Any:
    import shutil

    from support.e2e_runs import cli

    assert words[:2] == ["statewright", "design"] and "--script" in words
    shutil.copytree(ROOT / "docs" / "designs", tmp_path / "docs" / "designs", dirs_exist_ok=True)
    return cli(*words[1:], cwd=tmp_path)


def test_the_docs_design_session_runs_as_shown_from_its_script_file(tmp_path: Path) -> None:
    """docs/designer.md's session is the command it shows, run from a clone: the log it prints, the file it
    writes and the repair requests it sends are the page's, and so are the trace's events."""
    import json
    import re

    page = (ROOT / "docs" / "designer.md").read_text(encoding="utf-8")
    session = page.split("\n## A session\n", 1)[1].split("\n## ", 1)[0]
    command, log = re.findall(r"```text\n(.*?)```", session, re.DOTALL)[:2]
    [words] = _page_commands(command)
    done = _run_page_design(words, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == log
    written = (tmp_path / words[words.index("-o") + 1]).read_text(encoding="utf-8")
    assert written == re.findall(r"```fsm\n(.*?)```", page, re.DOTALL)[0]
    events = [json.loads(line) for line in (tmp_path / words[words.index("--trace") + 1]).read_text().splitlines()]
    sent = [e["message"] for e in events if e["event"] == "designer_feedback"]
    shown = re.findall(r"````text\n(.*?)````", page, re.DOTALL)
    assert [m.strip() for m in sent] == [b.strip() for b in shown]
    abridged = page.split("The session above, abridged:\n\n```text\n", 1)[1].split("```", 1)[0]
    shown_events = [json.loads(line) for line in abridged.splitlines()]
    assert [(e["event"], e.get("state"), sorted(e)) for e in shown_events] == \
        [(e["event"], e.get("state"), sorted(k for k in e if k != "time")) for e in events]


def test_the_docs_failed_design_runs_as_shown(tmp_path: Path) -> None:
    """The page's failure: the same command, its exit status and the start of the diagnostics file kept."""
    import re
    import subprocess

    page = (ROOT / "docs" / "designer.md").read_text(encoding="utf-8")
    section = page.split("\n### Failure\n", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```text\n(.*?)```", section, re.DOTALL)[0]
    design_words, echo, head = _page_commands(block)
    assert echo == ["echo", "$?"] and head[:2] == ["head", "-n"]
    shown = block.replace("\\\n", "").splitlines()
    outputs: list[list[str]] = [[]]  # what each command printed, in order
    for line in shown[1:]:
        if line.startswith("$ "):
            outputs.append([])
        else:
            outputs[-1].append(line)
    done = _run_page_design(design_words, tmp_path)
    assert done.stderr.splitlines() == outputs[0]
    assert [str(done.returncode)] == outputs[1]
    read = subprocess.run(head, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert read.splitlines() == outputs[2]


def test_a_drafts_use_lines_are_read_from_the_folder_it_is_written_to(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A draft was checked as if it lay in the working directory: a machine that uses teams/*.fsm was said to
    check and pass its tests (and was written) where the working directory held teams/, though the file
    written to another folder did not check; where only that folder held them, the design failed."""
    import shutil

    newsroom = ROOT / "examples" / "newsroom"
    script = {"designer": {"agents": [json.dumps(AGENTS)], "machine": [fenced(
        (newsroom / "newsroom.fsm").read_text(encoding="utf-8"))], "repair": []}}
    monkeypatch.chdir(tmp_path)
    shutil.copytree(newsroom / "teams", tmp_path / "teams")  # beside the working directory only
    (tmp_path / "out").mkdir()
    failed = api.design(TASK, output="out/newsroom.fsm", script=script, max_repairs=0, optimize=False)
    assert not failed.ok and not (tmp_path / "out" / "newsroom.fsm").exists()
    assert {d["code"] for d in failed.attempts[-1].diagnostics} == {"SW2100"}
    assert {d["file"] for d in failed.attempts[-1].diagnostics} == {"newsroom.fsm"}  # the model sees no path
    shutil.move(tmp_path / "teams", tmp_path / "out" / "teams")  # beside the file written only
    designed = api.design(TASK, output="out/newsroom.fsm", script=script, max_repairs=0)
    assert designed.ok, designed.log
    assert api.check_path(tmp_path / "out" / "newsroom.fsm").ok
