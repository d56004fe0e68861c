"""Constraints on fields and inputs (`in 1..5`, `len ..80`, `matches "..."`): checked at compile time, written
into the generated pydantic models, so that the JSON schema the model gets and the validation of each reply
are one thing, and enforced on inputs by every face."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.e2e_runs import cli, compile_runner, import_runner, runner_process

import statewright
from statewright import api
from statewright.compiler.checks.guard_facts import comparison_outcome as outcome_of

SPEC = """\
machine triage {
    input ticket: str len 1..200
    input threshold: int in 1..5 = 4
    input code: str matches "^[A-Z]{3}$" = "OPS"

    type Ticket {
        urgency: int in 1..5 "how urgent"
        confidence: float in 0.0..1.0
        title: str len 1..20 matches "^[A-Z].*$"
        tags: list[str] len ..2
        note: str? len ..5
    }

    agent triager {
        prompt "You triage tickets."
    }

    start state classify {
        agent triager
        do "Classify {{ ticket }} for {{ code }}."
        output Ticket
        retries 1
        when output.urgency >= threshold -> escalate
        -> done
    }

    state escalate {
        agent triager
        do "Escalate {{ classify.output.title }}."
        -> done
    }

    final state done

    test "urgent" {
        input {
            ticket "down"
        }
        reply classify {
            urgency 5
            confidence 1.0
            title "Down"
            tags []
        }
        reply escalate "ok"
        expect path [classify, escalate, done]
    }
}
"""

GOOD = {"urgency": 2, "confidence": 0.5, "title": "Slow", "tags": ["web"]}


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("constraints") / "triage.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def machine(spec_path: Path) -> statewright.Machine:
    return statewright.load(spec_path)


def test_check_and_test_pass_from_the_cli(spec_path: Path) -> None:
    assert cli("check", str(spec_path)).returncode == 0
    tested = cli("test", str(spec_path))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_constraints_become_the_json_schema_the_model_gets(machine: statewright.Machine) -> None:
    schema = machine.spec.states["classify"].output.model_json_schema()  # type: ignore[union-attr]
    props = schema["properties"]
    assert (props["urgency"]["minimum"], props["urgency"]["maximum"], props["urgency"]["type"]) == (1, 5, "integer")
    assert props["urgency"]["description"] == "how urgent"
    assert (props["confidence"]["minimum"], props["confidence"]["maximum"]) == (0.0, 1.0)
    assert (props["title"]["minLength"], props["title"]["maxLength"], props["title"]["pattern"]) == (1, 20, "^[A-Z].*$")
    assert props["tags"]["maxItems"] == 2 and "minItems" not in props["tags"]
    assert {"type": "string", "maxLength": 5} in props["note"]["anyOf"]  # optional: the constraint is on the str


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"urgency": 9}, "urgency", "less than or equal to 5"),
    ({"urgency": 0}, "urgency", "greater than or equal to 1"),
    ({"confidence": 1.5}, "confidence", "less than or equal to 1"),
    ({"title": ""}, "title", "at least 1 character"),
    ({"title": "lowercase"}, "title", "should match pattern"),
    ({"tags": ["a", "b", "c"]}, "tags", "at most 2 items"),
    ({"note": "too long"}, "note", "at most 5 characters"),
])
def test_a_reply_that_breaks_a_constraint_is_sent_back_then_fails_the_run(
        machine: statewright.Machine, change: dict[str, Any], field: str, words: str, tmp_path: Path) -> None:
    bad = {**GOOD, **change}
    trace = tmp_path / "trace.jsonl"
    failed = machine.run({"ticket": "t"}, script={"agent": {"classify": [bad, bad]}}, trace=str(trace))
    assert failed.status == "failed" and failed.failure is not None and failed.failure.kind == "output"
    assert field in failed.failure.message and words in failed.failure.message
    reasks = [json.loads(line) for line in trace.read_text().splitlines() if '"reask"' in line]
    assert reasks and words in reasks[0]["error"]  # the model was told what was wrong
    fixed = machine.run({"ticket": "t"}, script={"agent": {"classify": [bad, GOOD]}})
    assert fixed.ok and fixed.path == ["classify", "done"]


@pytest.mark.parametrize(("inputs", "words"), [
    ({"ticket": ""}, "at least 1 character"),
    ({"ticket": "t", "threshold": 7}, "less than or equal to 5"),
    ({"ticket": "t", "code": "ops"}, "should match pattern"),
])
def test_inputs_are_validated_by_every_face(machine: statewright.Machine, spec_path: Path, tmp_path: Path,
                                            inputs: dict[str, Any], words: str) -> None:
    outcome = machine.run(inputs, script={"agent": {"classify": [GOOD]}})
    assert outcome.status == "failed" and outcome.failure is not None and outcome.failure.kind == "input"
    assert words in outcome.failure.message
    argv = [f"--input={k}={v}" for k, v in inputs.items()]
    run = cli("run", str(spec_path), *argv, "--script", str(_script(tmp_path)))
    assert run.returncode == 2 and words in run.stderr, run.stderr
    runner = compile_runner(spec_path, tmp_path / "triage_runner.py")
    ran = runner_process(sys.executable, runner, *argv, "--script", str(_script(tmp_path)), cwd=tmp_path)
    assert ran.returncode == 2 and words in ran.stderr, ran.stderr


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agent": {"classify": [GOOD]}}), encoding="utf-8")
    return path


def test_the_generated_models_carry_the_constraints_as_pydantic_fields(spec_path: Path, tmp_path: Path) -> None:
    runner = compile_runner(spec_path, tmp_path / "triage_runner.py")
    source = runner.read_text(encoding="utf-8")
    assert 'urgency: int = Field(description="how urgent", ge=1, le=5)' in source
    assert 'title: str = Field(min_length=1, max_length=20, pattern="^[A-Z].*$")' in source
    assert "note: str | None = Field(default=None, max_length=5)" in source
    assert "annotation=Annotated[int, Field(ge=1, le=5)]" in source
    module = import_runner(runner, "triage_runner_constraints")
    assert module.run({"ticket": "t"}, script={"agent": {"classify": [GOOD]}}).ok


# ---- what the compiler says -----------------------------------------------------------------------


def _codes(field: str, extra: str = "") -> list[tuple[str, str]]:
    text = f"""machine m {{
    {extra}
    type T {{
        {field}
    }}
    agent a {{ prompt "p" }}
    start state s {{ agent a do "x" output T -> done }}
    final state done
}}"""
    comp = api.check_text(text, "m.fsm")
    return [(d.code, d.message) for d in comp.diagnostics if d.code not in ("SW7005",)]


@pytest.mark.parametrize(("field", "code"), [
    ("x: int len 1..3", "SW4022"),
    ("x: str in 1..3", "SW4022"),
    ("x: int matches \"^a$\"", "SW4022"),
    ("x: list[str] matches \"^a$\"", "SW4022"),
    ("x: bool in 0..1", "SW4022"),
    ('x: "a" | "b" len 1..1', "SW4022"),
    ("x: int in 5..1", "SW4023"),
    ("x: int in ..", "SW4023"),
    ("x: int in 0.5..3", "SW4023"),
    ("x: str len -1..3", "SW4023"),
    ("x: float in ..1e999", "SW4023"),
    ("x: str len 1..2 len 3..4", "SW2010"),
    ('x: str matches "^a$" len 1..2', "SW4025"),
    ('x: str matches "[a-"', "SW4024"),
    ('x: str matches "^(?<=a)b$"', "SW4024"),
    ('x: str matches "^(a)\\\\1$"', "SW4024"),
    ('x: str matches "^(?P<n>a)$"', "SW4024"),
    ('x: str matches "^(?i)a$"', "SW4024"),
    ('x: str matches """\\Aa\\Z"""', "SW4024"),
    ('x: str matches "^a++$"', "SW4024"),
    ('x: str matches "^(?>a)$"', "SW4024"),
    ('x: str matches """^\\d+$"""', "SW7021"),
    ('x: str matches "^(?:a|b)$"', "SW7021"),
    ('x: str matches "abc"', "SW7021"),
    ('x: str matches "^a+?$"', "SW7021"),
    ('x: str matches "^a|^b$"', "SW7021"),
])
def test_a_constraint_that_cannot_mean_the_same_everywhere_is_reported(field: str, code: str) -> None:
    found = _codes(field)
    assert {c for c, _ in found} == {code}, found


@pytest.mark.parametrize("field", [
    "x: int in 1..5", "x: int in -5..-1", "x: float in 0.0..", "x: float in ..0.5", "x: int in 1.0..5.0",
    "x: str len 0..0", 'x: str len 1..80 matches "^[A-Z][a-z ]*$"', "x: list[int] len 1..", "x: int? in 1..2",
    'x: str matches """^[A-Z]{3}-[0-9]+\\.[0-9]$"""', 'x: str matches "^[\\\\]\\"{}]$"',
    "len: int in 0..", "matches: str len 1..", "in: str",
])
def test_constraints_every_engine_reads_alike_are_clean(field: str) -> None:
    assert _codes(field) == []


def test_a_pattern_error_points_into_the_pattern() -> None:
    comp = api.check_text('machine m {\n  type T {\n    x: str matches "^(?=a)b$"\n  }\n'
                          '  agent a { prompt "p" }\n  start state s { agent a do "x" output T -> d }\n'
                          '  final state d\n}\n', "m.fsm")
    [diag] = [d for d in comp.diagnostics if d.code == "SW4024"]
    assert diag.span is not None and diag.span.text == "(?="


def test_each_of_many_features_of_a_long_pattern_points_at_its_own_characters() -> None:
    pattern = "a^" * 2000  # a '^' every second character: 2,000 warnings in one literal
    comp = api.check_text('machine m {\n  type T {\n    x: str matches """' + pattern + '"""\n  }\n'
                          '  agent a { prompt "p" }\n  start state s { agent a do "x" output T -> d }\n'
                          '  final state d\n}\n', "m.fsm")
    assert comp.source is not None
    first = comp.source.text.index('"""') + 3
    spans = [d.span for d in comp.diagnostics if d.label == "'^' inside the pattern" and d.span is not None]
    assert [s.text for s in spans] == ["^"] * 2000
    assert [s.start - first for s in spans] == list(range(1, 4000, 2))


def test_check_stays_off_pydantic_without_patterns_and_uses_only_its_core_with_them(tmp_path: Path) -> None:
    import subprocess

    plain = tmp_path / "plain.fsm"
    plain.write_text(SPEC.replace(' matches "^[A-Z]{3}$"', "").replace(' matches "^[A-Z].*$"', ""))
    code = ("import sys\nfrom statewright.cli import main\n"
            f"assert main(['check', {str(plain)!r}]) == 0\n"
            "assert 'pydantic' not in sys.modules and 'pydantic_core' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with_patterns = tmp_path / "patterns.fsm"
    with_patterns.write_text(SPEC)
    code = code.replace(str(plain), str(with_patterns)).replace(
        "'pydantic' not in sys.modules and 'pydantic_core' not in sys.modules", "'pydantic' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("guard", "always"), [
    ("output.urgency > 5", "false"), ("output.urgency >= 1", "true"), ("output.urgency == 0", "false"),
    ("5 < output.urgency", "false"), ("output.urgency != 9", "true"), ("len(output.title) > 20", "false"),
    ("len(output.title) >= 1", "true"), ("threshold <= 5", "true"), ("-1 > output.urgency", "false"),
])
def test_a_comparison_the_range_decides_is_a_warning(guard: str, always: str) -> None:
    text = SPEC.replace("when output.urgency >= threshold -> escalate", f"when {guard} -> escalate")
    found = [(d.code, d.message) for d in api.check_text(text, "t.fsm").diagnostics]
    assert ("SW7020", f"the comparison is always {always}") in found, found


@pytest.mark.parametrize("guard", ["output.urgency > 4", "output.urgency == 3", "len(output.title) > 3",
                                   "output.confidence < 0.5", "output.urgency > threshold"])
def test_a_comparison_the_range_leaves_open_is_not_reported(guard: str) -> None:
    text = SPEC.replace("when output.urgency >= threshold -> escalate", f"when {guard} -> escalate")
    assert [d.code for d in api.check_text(text, "t.fsm").diagnostics if d.code != "SW7005"] == []


numbers = st.one_of(st.integers(-10, 10), st.sampled_from([-2.5, 0.5, 3.25]))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.one_of(st.none(), numbers),
       st.one_of(st.none(), numbers), numbers)
def test_the_outcome_a_range_decides_is_the_outcome_of_every_value_in_it(op: str, low: Any, high: Any,
                                                                         n: Any) -> None:
    import operator

    if low is not None and high is not None and low > high:
        return
    decided = outcome_of(op, low, high, n)
    apply = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
             "!=": operator.ne}[op]
    lo = low if low is not None else -100
    hi = high if high is not None else 100
    samples = {lo, hi, (lo + hi) / 2, n, n - 0.5, n + 0.5, n - 1, n + 1}
    values = {apply(x, n) for x in samples if lo <= x <= hi}
    if decided is not None:
        assert values <= {decided}
    elif low is not None and high is not None and low == high:
        assert len(values) <= 1 or decided is None
