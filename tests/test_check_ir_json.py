"""The JSON views of the syntax tree and the IR, and the schema that docs/ir.md publishes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from statewright.api import check_file, check_text
from statewright.compiler import ir
from statewright.compiler.views.ir_json import IR_JSON_SCHEMA, ast_to_json, ir_to_json

ROOT = Path(__file__).parent.parent
VALID = sorted((ROOT / "tests" / "cases" / "valid").glob("*/input.fsm"))
IR_PAGE = ROOT / "docs" / "ir.md"


def _ir(path: Path) -> ir.Machine:
    compilation = check_file(path)
    assert isinstance(compilation.ir, ir.Machine)
    return compilation.ir


def _fenced_after(page: str, heading: str, language: str) -> str:
    section = page.split(heading, 1)[1]
    match = re.search(rf"^```{language}\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)
    assert match, f"no {language} block after {heading!r}"
    return match.group(1)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(IR_JSON_SCHEMA)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.parent.name)
def test_the_ir_of_every_valid_case_follows_the_schema(path: Path) -> None:
    data = json.loads(json.dumps(ir_to_json(_ir(path))))
    jsonschema.Draft202012Validator(IR_JSON_SCHEMA).validate(data)


def test_the_schema_rejects_what_the_ir_never_holds() -> None:
    data = ir_to_json(_ir(VALID[0]))
    data["states"][0]["kind"] = "robot"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(IR_JSON_SCHEMA).validate(data)


def test_the_documented_schema_is_the_schema_in_the_code() -> None:
    page = IR_PAGE.read_text(encoding="utf-8")
    assert json.loads(_fenced_after(page, "## JSON Schema", "json")) == IR_JSON_SCHEMA


def test_the_documented_example_is_what_the_compiler_produces() -> None:
    page = IR_PAGE.read_text(encoding="utf-8")
    source = _fenced_after(page, "## An example", "text")
    documented = json.loads(_fenced_after(page.split("## An example", 1)[1], "lowers to", "json"))
    compilation = check_text(source, "greet.fsm")
    assert isinstance(compilation.ir, ir.Machine)
    assert ir_to_json(compilation.ir) == documented


def test_guards_become_nested_objects_with_spans() -> None:
    machine = _ir(ROOT / "tests" / "cases" / "valid" / "review-pipeline" / "input.fsm")
    guard = ir_to_json(machine)["states"][1]["transitions"][0]["guard"]
    assert guard["kind"] == "binary" and guard["op"] == ">="
    assert guard["left"]["kind"] == "attribute" and guard["left"]["attr"] == "score"
    assert guard["left"]["value"] == {"kind": "name", "name": "output",
                                      "span": guard["left"]["value"]["span"]}
    assert guard["right"]["kind"] == "literal" and guard["right"]["value"] == 85
    assert guard["span"]["file"].endswith("input.fsm")
    assert set(guard["span"]["start"]) == {"line", "column", "offset"}


def test_the_ast_view_names_each_node_and_its_span() -> None:
    compilation = check_file(VALID[0])
    assert compilation.ast is not None
    tree = ast_to_json(compilation.ast)
    assert tree["node"] == "Machine" and tree["name"]["value"] == compilation.ast.name.value
    assert tree["span"]["start"] == compilation.ast.span.start_pos.to_json()
    kinds = {item["node"] for item in tree["items"]}
    assert {"StateDecl", "AgentDecl", "TestDecl"} <= kinds
    json.dumps(tree)  # plain JSON data all the way down


_DUMP = (
    "import json, sys\n"
    "from statewright.api import check_file\n"
    "from statewright.compiler.views.ir_json import ir_to_json, ast_to_json\n"
    "c = check_file(sys.argv[1])\n"
    "print(json.dumps([ir_to_json(c.ir), ast_to_json(c.ast)]))\n"
)


def test_the_json_views_are_identical_across_hash_seeds() -> None:
    path = str(ROOT / "tests" / "cases" / "valid" / "all-features" / "input.fsm")
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outputs.add(subprocess.run([sys.executable, "-c", _DUMP, path], env=env, check=True,
                                   capture_output=True, text=True).stdout)
    assert len(outputs) == 1


def test_tool_secrets_and_test_expectations_appear_in_the_ir_as_names_and_values() -> None:
    data = ir_to_json(_ir(ROOT / "tests" / "cases" / "valid" / "tool-secrets-and-expectations" / "input.fsm"))
    tool = next(t for t in data["tools"] if t["name"] == "std.http_get")
    assert tool["secrets"] == ["SEARCH_API_KEY"]
    assert tool["headers"] == [{"name": "Authorization", "value": "Bearer ${SEARCH_API_KEY}"},
                               {"name": "X-Client", "value": "statewright $${not a secret}"}]
    assert tool["query"] == [{"name": "key", "value": "${SEARCH_API_KEY}"}]
    first, second = data["tests"]
    assert [(e["kind"], e["state"], e["visit"], e["contains"]) for e in first["expectations"]] == [
        ("output", "search", 1, False), ("instruction", "summarise", 1, False), ("output", "summarise", 1, False)]
    assert first["expectations"][0]["value"] == {"status": 200}
    assert first["expectations"][1]["value"] == "Answer what is an FSM from: FSM: a finite-state machine."
    assert (first["allow_unused"], second["allow_unused"]) == (False, True)
    assert all(t["secrets"] == [] and t["headers"] == [] and t["query"] == [] for t in data["tools"]
               if t["name"] != "std.http_get")
