"""How deep a type's values nest, counted through the named types it uses (SW4015).

A chain of types each holding the next nests as deep as one type written out, which the parser's nesting
limit (SW1020) cannot see. The check refuses a chain deeper than that limit with one positioned error; a
chain at the limit runs on every face that reads a structured reply (the schema sent to the model, the
reply's depth limit, a script, the checkpoint).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import cli
from support.fake_openai_server import FakeOpenAIServer, Reply

from statewright import api
from statewright.grammar.nesting import MAX_NESTING


def _chain(levels: int, *, lists: int = 0) -> str:
    """A machine whose output T0 nests `levels` records deep: T0 holds T1, ..., T{levels-1} holds an int;
    with `lists`, T0's field wraps T1 in that many lists (each one more level)."""
    first = "list[" * lists + "T1" + "]" * lists
    types = "".join(f"    type T{i} {{\n        next: {first if i == 0 else f'T{i + 1}'}\n        v: int\n    }}\n"
                    for i in range(levels - 1))
    types += f"    type T{levels - 1} {{ v: int }}\n"
    return ('machine chain {\n    model "openai/deep"\n' + types
            + '    agent a { prompt "p" }\n'
            + '    start state s {\n        agent a\n        do "go"\n        output T0\n        -> done\n    }\n'
            + "    final state done\n}\n")


def _value(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"v": levels - 1}
    for i in range(levels - 2, -1, -1):
        value = {"next": value, "v": i}
    return value


def test_a_chain_one_level_past_the_limit_is_one_error_at_its_outermost_type() -> None:
    [diag] = api.check_text(_chain(MAX_NESTING + 1), "chain.fsm").diagnostics
    assert diag.code == "SW4015" and diag.severity == "error"
    assert f"type 'T0' nests {MAX_NESTING + 1} levels" in diag.message and f"at most {MAX_NESTING}" in diag.message
    assert diag.span is not None and diag.span.start_pos.line == 3  # `type T0`, the outermost of the chain
    assert diag.label.startswith("T0 -> T1 -> T2") and diag.help


def test_a_chain_at_the_limit_is_accepted() -> None:
    assert api.check_text(_chain(MAX_NESTING), "chain.fsm").diagnostics == []


def test_lists_count_as_levels() -> None:
    [diag] = api.check_text(_chain(MAX_NESTING - 1, lists=2), "chain.fsm").diagnostics
    assert diag.code == "SW4015" and f"nests {MAX_NESTING + 1} levels" in diag.message
    assert api.check_text(_chain(MAX_NESTING - 1, lists=1), "chain.fsm").diagnostics == []


@pytest.mark.parametrize("levels", [3000, 20_000])
def test_a_chain_of_thousands_of_types_is_one_error_not_a_recursion(levels: int) -> None:
    diags = api.check_text(_chain(levels), "chain.fsm").diagnostics
    assert [d.code for d in diags] == ["SW4015"]


def test_a_type_that_contains_itself_is_reported_as_such_and_not_as_too_deep() -> None:
    text = _chain(3).replace("type T2 { v: int }", "type T2 {\n        back: T0\n    }")
    assert [d.code for d in api.check_text(text, "cycle.fsm").diagnostics] == ["SW4009"]


def test_two_chains_too_deep_are_two_errors() -> None:
    text = _chain(MAX_NESTING + 1)
    second = _chain(MAX_NESTING + 1).replace("T", "U").split("\n", 2)[2]
    types = second[: second.index("    agent a")]
    text = text.replace("    agent a", types + "    agent a", 1)
    errors = [d for d in api.check_text(text, "two.fsm").diagnostics if d.severity == "error"]
    assert [(d.code, d.message.split("'")[1]) for d in errors] == [("SW4015", "T0"), ("SW4015", "U0")]


def test_a_chain_at_the_limit_runs_from_a_script(tmp_path: Path) -> None:
    spec = tmp_path / "chain.fsm"
    spec.write_text(_chain(MAX_NESTING))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"s": [_value(MAX_NESTING)]}}))
    done = cli("run", str(spec), "--script", str(script), "--quiet", "--checkpoint", str(tmp_path / "runs.db"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "final" and result["result"] == _value(MAX_NESTING)


def test_a_chain_at_the_limit_runs_against_a_model_server(tmp_path: Path) -> None:
    spec = tmp_path / "chain.fsm"
    spec.write_text(_chain(MAX_NESTING))
    with FakeOpenAIServer(Reply(json=_value(MAX_NESTING))) as server:
        done = cli("run", str(spec), "--quiet", env={"OPENAI_API_BASE": server.url + "/v1", "OPENAI_API_KEY": "k"})
        [request] = server.requests
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == _value(MAX_NESTING)
    sent = json.dumps(request.body)
    assert '"T99"' in sent  # the whole schema went to the model
