"""Intermediate expectations, typed results and unused replies, through `statewright test`, the Python API and
a generated runner's `--selftest` (a subprocess): all three run the same test-block code and say the same."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from support.e2e_runs import cli, compile_runner, runner_process

import statewright

MACHINE = textwrap.dedent("""\
    # revise.fsm — a draft, a typed review, at most one revision, and a word count by tool
    machine revise {
        input topic: str

        type Critique {
            score: int "0-100"
            fixes: list[str]
            ok: bool
        }

        agent writer {
            prompt "You write short notes."
        }

        agent critic {
            prompt "You review notes."
        }

        start state draft {
            agent writer
            do "Write a note about {{ topic }}."
            -> review
        }

        state review {
            agent critic
            do "Score the note: {{ revise.output or draft.output }}"
            output Critique
            when output.score >= 85 -> count
            when "the note is off topic" -> draft max 1
            -> revise max 1
            otherwise -> count
        }

        state revise {
            agent writer
            do "Apply these fixes: {{ review.output.fixes }}"
            -> review
        }

        state count {
            call std.python(code = "print(len('''x'''))")
            -> words
        }

        state words {
            agent writer
            do "How many words?"
            output int
            -> done
        }

        final state done

    @TESTS
    }
""")

PASSING = """\
    test "every expectation holds" {
        input {
            topic "FSMs"
        }
        reply draft "A thin note."
        reply review {
            score 60
            fixes ["add an example"]
            ok false
        }
        verdict review none
        reply revise "A note with an example."
        reply review {
            score 90
            fixes []
            ok true
        }
        reply count {
            exit_code 0
            stdout "1"
            stderr ""
            timed_out false
        }
        reply words 12
        expect path [draft, review, revise, review, count, words, done]
        expect output draft "A thin note."
        expect output draft contains "thin"
        expect output review {
            score 60
            fixes ["add an example"]
        }
        expect output review visit 2 {
            ok true
        }
        expect instruction revise "Apply these fixes: [\\"add an example\\"]"
        expect instruction review visit 2 contains "A note with an example."
        expect output count {
            exit_code 0
        }
        expect output words 12
        expect result 12
    }
"""


def spec_with(tmp_path: Path, tests: str, name: str = "revise.fsm") -> Path:
    path = tmp_path / name
    path.write_text(MACHINE.replace("@TESTS\n", textwrap.indent(textwrap.dedent(tests), "    ")), encoding="utf-8")
    return path


def at(spec: Path, line_start: str, nth: int = 1) -> str:
    """`SPEC:LINE:COL` of the nth line of the spec that starts (after its indentation) with `line_start`."""
    found = [(number, len(line) - len(line.lstrip()) + 1)
             for number, line in enumerate(spec.read_text(encoding="utf-8").splitlines(), 1)
             if line.lstrip().startswith(line_start)]
    line, column = found[nth - 1]
    return f"{spec}:{line}:{column}"


def outcomes_of(path: Path) -> list[tuple[bool, list[str]]]:
    return [(o.passed, o.messages) for o in statewright.load(path).test()]


def test_expectations_along_the_path_pass_in_every_face(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, PASSING)
    done = cli("test", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "PASS  every expectation holds"
    assert outcomes_of(spec) == [(True, [])]
    runner = compile_runner(spec, tmp_path / "revise_runner.py")
    done = runner_process(sys.executable, runner, "--selftest")
    assert done.returncode == 0 and done.stdout.strip() == "PASS  every expectation holds", done.stderr


FAILING = PASSING.replace('test "every expectation holds"', 'test "wrong at each step"').replace(
    '''expect output review visit 2 {
            ok true
        }''', '''expect output review visit 2 {
            ok 1
        }''').replace('expect output words 12\n', 'expect output words "12"\n').replace(
    'contains "A note with an example."', 'contains "A note with two examples."').replace(
    '''expect output review {
            score 60''', '''expect output review {
            score 61''').replace("expect result 12", "expect result 12.0")


def test_a_failing_expectation_says_what_differs_with_typed_values(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, FAILING)
    assert "SW6040" in cli("check", str(spec)).stdout  # `ok 1` and `"12"` do not even fit the types
    # the checker refuses the test, so the runtime's own comparison is shown with values that do fit
    fitting = FAILING.replace("ok 1", "ok false").replace('expect output words "12"', "expect output words 13")
    spec = spec_with(tmp_path, fitting)
    done = cli("test", str(spec))
    assert done.returncode == 1
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "FAIL  wrong at each step  (" in done.stdout
    assert (f"expect output review ({at(spec, 'expect output review {')}): `.score` is 60, expected 61; the output is "
            '{"fixes": ["add an example"], "ok": false, "score": 60}') in lines
    assert (f"expect output review visit 2 ({at(spec, 'expect output review visit 2')}): `.ok` is true, expected false; the output is "
            '{"fixes": [], "ok": true, "score": 90}') in lines
    assert (f"expect instruction review visit 2 ({at(spec, 'expect instruction review visit 2')}): the instruction does not contain "
            '"A note with two examples."; it is "Score the note: A note with an example."') in lines
    assert f"expect output words ({at(spec, 'expect output words')}): the output is 12, expected 13" in lines
    assert not any("expected result" in line for line in lines)  # 12 matches 12.0: numbers compare by value

    [(passed, messages)] = outcomes_of(spec)
    assert not passed and len(messages) == 4
    runner = compile_runner(spec, tmp_path / "revise_runner.py")
    selftest = runner_process(sys.executable, runner, "--selftest")
    assert selftest.returncode == 1
    # the runner reports the same problems (naming positions by the spec's file name)
    assert [line for line in selftest.stdout.splitlines() if "expect " in line] == [
        line.replace(str(spec), spec.name) for line in done.stdout.splitlines() if "expect " in line]


TEXT_RESULT = """\
    test "a text result is not a number" {
        input {
            topic "FSMs"
        }
        reply draft "A note."
        reply review {
            score 90
            fixes []
            ok true
        }
        reply count {
            exit_code 0
            stdout "1"
            stderr ""
            timed_out false
        }
        reply words 1
        expect result "1"
    }

    test "true is not 1" {
        input {
            topic "FSMs"
        }
        reply draft "A note."
        reply review {
            score 90
            fixes []
            ok true
        }
        reply count {
            exit_code 0
            stdout "1"
            stderr ""
            timed_out false
        }
        reply words 1
        expect result true
    }
"""


def test_expect_result_compares_typed_values_exactly(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, TEXT_RESULT)
    assert outcomes_of(spec) == [
        (False, ['expected result "1" (text), got 1 (a number)']),
        (False, ["expected result true (a boolean), got 1 (a number)"]),
    ]


def test_a_number_expected_from_a_result_template_is_refused_by_the_checker(tmp_path: Path) -> None:
    source = MACHINE.replace("final state done\n", 'final state done {\n        result "{{ words.output }}"\n    }\n')
    path = tmp_path / "templated.fsm"
    path.write_text(source.replace("@TESTS\n", textwrap.indent(textwrap.dedent(PASSING), "    ")), encoding="utf-8")
    done = cli("check", str(path))
    assert done.returncode == 1 and "error[SW6042]" in done.stdout and 'expect result "12"' in done.stdout
    path.write_text(path.read_text().replace("expect result 12", 'expect result "12"'), encoding="utf-8")
    assert cli("test", str(path)).returncode == 0


UNUSED = """\
    test "scripts one review too many" {
        input {
            topic "FSMs"
        }
        reply draft "A note."
        reply review {
            score 90
            fixes []
            ok true
        }
        verdict review none
        reply review {
            score 95
            fixes []
            ok true
        }
        reply count {
            exit_code 0
            stdout "1"
            stderr ""
            timed_out false
        }
        reply words 2
        expect path [draft, review, count, words, done]
    }
"""


def test_replies_the_run_never_uses_fail_the_test_naming_each_line(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, UNUSED)
    assert "error" not in cli("check", str(spec)).stdout
    done = cli("test", str(spec))
    assert done.returncode == 1
    assert f"verdict #1 for state 'review' ({at(spec, 'verdict review')}) was never used: none" in done.stdout
    assert (f"reply #2 for state 'review' ({at(spec, 'reply review', 2)}) was never used: "
            '{"fixes": [], "ok": true, "score": 95}') in done.stdout
    assert "write 'allow unused replies' in the test" in done.stdout
    runner = compile_runner(spec, tmp_path / "revise_runner.py")
    selftest = runner_process(sys.executable, runner, "--selftest")
    assert selftest.returncode == 1 and "was never used" in selftest.stdout

    allowed = spec_with(tmp_path, UNUSED.replace("expect path", "allow unused replies\n        expect path"),
                        "allowed.fsm")
    assert cli("test", str(allowed)).returncode == 0
    assert outcomes_of(allowed) == [(True, [])]


def test_an_unused_reply_is_not_reported_over_the_first_real_failure(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, UNUSED.replace("expect path [draft, review, count, words, done]",
                                              "expect path [draft, review, revise, review, count, words, done]"))
    [(passed, messages)] = outcomes_of(spec)
    assert not passed and messages == ["the path differs from the expected path"]


@pytest.mark.parametrize("visit, problem", [
    ("visit 2", "'revise' ran once, so it has no instruction at visit 2"),
    ("", "'revise' never ran, so it has no instruction at visit 1"),
])
def test_an_expectation_on_a_visit_that_never_happened_says_so(tmp_path: Path, visit: str, problem: str) -> None:
    tests = PASSING.replace('expect instruction revise "', f'expect instruction revise {visit} "'.replace("  ", " "))
    if not visit:  # a run that never revises: the first review is good enough
        tests = tests.replace("score 60", "score 86").replace("expect path [draft, review, revise, review, count, "
                                                              "words, done]\n", "")
        tests = tests.replace('reply revise "A note with an example."\n', "allow unused replies\n")
    [(passed, messages)] = outcomes_of(spec_with(tmp_path, tests))
    assert not passed and any(message.endswith(problem) for message in messages), messages


@pytest.mark.parametrize("broken", [
    "expect output", "expect output review visit", 'expect output review visit x "a"', "expect instruction review 3",
    "expect instruction review contains 3", 'expect output review contains { a 1 }', "allow unused", "allow replies",
    'expect output review visit -1 "a"', 'expect instruction visit 2 "a"',
])
def test_a_malformed_expectation_gets_positioned_syntax_errors(tmp_path: Path, broken: str) -> None:
    spec = spec_with(tmp_path, f'test "t" {{\n    {broken}\n}}\n')
    done = cli("check", str(spec))
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert "error[SW1" in done.stdout and "revise.fsm:" in done.stdout, done.stdout
