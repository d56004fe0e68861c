"""all(), any() and count() over typed lists: type-checked with the item bound, in guards and tool-call
arguments, written as Python's own all/any/sum by codegen, and the same in every face."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.e2e_runs import cli, compile_runner, import_runner, runner_process

import statewright
from statewright import api

SPEC = """\
machine votes {
    input blocked: list[str] = ["spam"]
    input extra: list[int]? = none

    type Vote {
        approve: bool
        tags: list[str]
    }

    type Ballot {
        votes: list[Vote]
    }

    agent counter {
        prompt "You count votes."
    }

    start state vote {
        agent counter
        do "Vote."
        output Ballot
        when any(any(t in blocked for t in v.tags) for v in output.votes) -> blocked_state
        when count(v.approve for v in output.votes) >= 2 -> tally
        when all(not v.approve for v in output.votes) -> rejected
        -> vote max 1
        otherwise -> rejected
    }

    state tally {
        call std.python(code = "print('tally')", timeout = 1.0 + count(v.approve for v in vote.output.votes))
        when output.exit_code == 0 -> shipped
        otherwise -> rejected
    }

    final state shipped
    final state rejected
    final state blocked_state

    test "two approvals ship" {
        reply vote {
            votes [{ approve true tags [] }, { approve true tags ["ok"] }, { approve false tags [] }]
        }
        reply tally {
            exit_code 0
            stdout "tally"
            stderr ""
            timed_out false
        }
        expect path [vote, tally, shipped]
    }

    test "a blocked tag stops everything" {
        reply vote {
            votes [{ approve true tags ["spam"] }]
        }
        expect final blocked_state
    }

    test "no votes at all reject" {
        reply vote {
            votes []
        }
        expect final rejected
    }
}
"""


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lists") / "votes.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


def test_check_and_the_test_blocks_pass_from_the_cli(spec_path: Path) -> None:
    checked = cli("check", str(spec_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = cli("test", str(spec_path))
    assert tested.returncode == 0 and "3 passed" in tested.stdout + tested.stderr, tested.stdout + tested.stderr


def test_the_generated_guards_are_plain_python(spec_path: Path, tmp_path: Path) -> None:
    source = compile_runner(spec_path, tmp_path / "votes_runner.py").read_text(encoding="utf-8")
    assert ("return any(any(t in s.inputs[\"blocked\"] for t in v.tags) for v in s.output.votes)" in source)
    assert "return sum(1 for v in s.output.votes if v.approve) >= 2" in source
    assert "return all(not v.approve for v in s.output.votes)" in source
    assert '"timeout": 1.0 + sum(1 for v in s.outputs.get("vote").votes if v.approve),' in source


def test_every_face_takes_the_same_path(spec_path: Path, tmp_path: Path) -> None:
    ballot = {"votes": [{"approve": False, "tags": []}, {"approve": False, "tags": ["x"]}]}
    script = {"agent": {"vote": [ballot]}}
    through_api = statewright.load(spec_path).run({}, script=script)
    runner = compile_runner(spec_path, tmp_path / "votes_runner.py")
    through_runner = import_runner(runner, "votes_runner").run({}, script=script)
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    through_cli = cli("run", str(spec_path), "--script", str(tmp_path / "script.json"))
    through_process = runner_process(sys.executable, runner, "--script", str(tmp_path / "script.json"),
                                     cwd=tmp_path)
    for result in (through_api, through_runner):
        assert result.ok and result.path == ["vote", "rejected"]
    for done in (through_cli, through_process):
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["path"] == ["vote", "rejected"]


@pytest.mark.parametrize(("guard", "code", "words"), [
    ("all(v for v in output.votes)", "SW4004", "the test in all() is Vote, not a boolean"),
    ("any(v.approve for v in output)", "SW4021", "any() goes over a list; 'output' is Ballot"),
    ("all(v.approve for blocked in output.votes)", "SW4020", "'blocked' already names an input"),
    ("all(x > 0 for x in extra)", "SW4014", "may be none"),
    ("count(v.nope for v in output.votes) > 0", "SW2006", "Vote has no field 'nope'"),
    ("all(all(v.approve for v in output.votes) for v in output.votes)", "SW4020", "an enclosing all()"),
    ("total(v.approve for v in output.votes) > 0", "SW2009", "'total' does not take 'for'"),
    ("sum(v.approve for v in output.votes) > 0", "SW4005", "sum() takes numbers; 'v.approve' is bool"),
    ("all(output for output in output.votes)", "SW4020", "the current state's output"),
    ("all(v.approve for vote in output.votes)", "SW4020", "'vote' already names a state"),
])
def test_mistakes_in_a_quantifier_are_reported(guard: str, code: str, words: str) -> None:
    text = SPEC.replace("when all(not v.approve for v in output.votes) -> rejected", f"when {guard} -> rejected")
    found = [(d.code, d.message) for d in api.check_text(text, "votes.fsm").diagnostics]
    assert any(c == code and words in m for c, m in found), found


def test_an_optional_list_tested_for_none_first_is_fine() -> None:
    text = SPEC.replace("when all(not v.approve for v in output.votes) -> rejected",
                        "when extra != none and all(x > 0 for x in extra) -> rejected")
    assert [d.code for d in api.check_text(text, "votes.fsm").diagnostics] == []


def test_a_quantifier_over_a_literal_list_is_a_constant_guard() -> None:
    text = SPEC.replace("when all(not v.approve for v in output.votes) -> rejected",
                        "when count(x > 1 for x in [1, 2, 3]) == 0 -> rejected")
    found = [(d.code, d.message) for d in api.check_text(text, "votes.fsm").diagnostics]
    assert ("SW7007", "the guard is always false") in found


def test_graph_labels_quote_the_quantifier(spec_path: Path) -> None:
    comp = api.check_file(spec_path)
    mermaid = api.render_graph(comp, "mermaid")
    dot = api.render_graph(comp, "dot")
    assert '|"count(v.approve for v in output.votes) #62;= 2"|' in mermaid
    assert 'label="count(v.approve for v in output.votes) >= 2"' in dot
